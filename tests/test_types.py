"""The language's typing rule (passes/frontend/types.py), and that both printers read it.

Expected types are the rules written in :mod:`polymap.reference.interpreter`'s
docstring, worked by hand; the NumPy printer's text is evaluated with NumPy
and its result dtype compared with the rule's; the C printer's text is
compiled and run by the tests that check generated C against the reference.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from polymap import ir
from polymap.errors import SemanticError
from polymap.passes.frontend.types import ARITY, common_type, typed
from polymap.codegen.c.expr import ValuePrinter as CPrinter
from polymap.codegen.numpy.values import ValuePrinter as NumpyPrinter

from test_reference import E

DTYPES = {"F": "f32", "D": "f64", "I": "i32", "L": "i64"}


@pytest.mark.parametrize("text, want", [
    ("F[i] * 2", "f32"),          # an integer literal adopts the tensor's type
    ("F[i] * 0.5", "f32"),        # a float literal next to f32 stays f32 (0.5f)
    ("I[i] * 0.5", "f64"),        # a float literal next to an integer tensor gives f64
    ("I[i] * 2", "i32"),
    ("I[i] + L[i]", "i64"),
    ("L[i] + F[i]", "f32"),       # i32 < i64 < f32 < f64
    ("F[i] + D[i]", "f64"),
    ("i / 2 + D[i]", "f64"),
    ("i + 1", "int"),             # weak stays weak
    ("i + 0.5", "float"),
    ("-F[i]", "f32"),
    ("F[i] < D[i]", "int"),       # comparisons, and, or, not give integers
    ("F[i] > 0 and D[i] < 1", "int"),
    ("not F[i]", "int"),
    ("select(I[i] > 0, F[i], 2)", "f32"),
    ("select(I[i] > 0, I[i], D[i])", "f64"),
    ("sqrt(F[i])", "f32"),        # sqrtf
    ("sqrt(I[i])", "f64"),
    ("sqrt(i)", "float"),
    ("pow(I[i], 2)", "f64"),      # pow of integers is a double
    ("pow(F[i], 2)", "f32"),
    ("floor(F[i])", "f32"),       # floor keeps the type
    ("floor(I[i])", "i32"),
    ("abs(L[i])", "i64"),
    ("max(I[i], F[i], D[i])", "f64"),
    ("min(I[i], 1)", "i32"),
])
def test_the_documented_rules(text, want):
    assert typed(E(text), DTYPES).type == want


def test_min_max_fold_left_each_step_in_its_own_type():
    t = typed(E("max(I[i], F[i], D[i])"), DTYPES)
    inner, last = t.args
    assert (t.op, t.to) == ("max", ("f64", "f64"))
    assert (inner.op, inner.type, inner.to) == ("max", "f32", ("f32", "f32"))
    assert last.type == "f64"


def test_operands_are_converted_to_what_the_operation_takes():
    t = typed(E("F[i] < D[i]"), DTYPES)
    assert t.to == ("f64", "f64") and t.type == "int"
    s = typed(E("select(F[i] > 0, I[i], F[i])"), DTYPES)
    assert s.to == ("int", "f32", "f32")


WEAK_AND_TENSOR = ["i32", "i64", "f32", "f64", "int", "float"]


@given(st.sampled_from(WEAK_AND_TENSOR), st.sampled_from(WEAK_AND_TENSOR))
def test_common_type_is_symmetric_and_a_weak_int_always_adopts(a, b):
    assert common_type(a, b) == common_type(b, a)
    assert common_type(a, "int") == a
    assert common_type(a, a) == a


@pytest.mark.parametrize("func, n", [("sqrt", 2), ("pow", 1), ("pow", 3), ("max", 1), ("abs", 0), ("tanh", 1)])
def test_both_printers_refuse_a_wrong_arity_the_same_way(func, n):
    """The rule checks arity once: the C and NumPy printers used to disagree (only one checked)."""
    loc = ir.Loc(3, 7, 3, 12, None)
    e = ir.Call(func, tuple(ir.Ref("F", (ir.Var("i"),)) for _ in range(n)), loc)
    kernel = ir.Kernel("k", (), (), (ir.Decl("F", "in", (ir.Var("N"),), "f32"),), ())
    messages = []
    for printer in (CPrinter(kernel, {}, lambda r: "F[i]"), NumpyPrinter({"F": "f32"}, lambda r: "F[i]", str)):
        with pytest.raises(SemanticError) as info:
            printer.value(e)
        assert info.value.diagnostics[0].loc is loc
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert (func in ARITY) == ("unknown function" not in messages[0])


# ---- the NumPy printer computes in exactly the rule's types

NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}
LEAVES = ["F[i]", "D[i]", "I[i]", "L[i]", "i", "2", "0.5"]


def expressions() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            inner.map(lambda a: f"(-{a})"),
            st.tuples(inner, inner).map(lambda t: f"max({t[0]}, {t[1]})"),
            st.tuples(inner, inner, inner).map(lambda t: f"select({t[0]} < {t[1]}, {t[1]}, {t[2]})"),
            inner.map(lambda a: f"sqrt(abs({a}) + 1)"),
        )
    return st.recursive(st.sampled_from(LEAVES), extend, max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(expressions())
def test_numpy_text_has_the_rule_type(text):
    t = typed(E(text), DTYPES)
    arrays = {"F": np.array([1.5], np.float32), "D": np.array([2.25], np.float64),
              "I": np.array([3], np.int32), "L": np.array([4], np.int64)}
    printer = NumpyPrinter(DTYPES, lambda r: f"{r.tensor}[0]", lambda name: name)
    out = printer.value(E(text))
    assert out.type == t.type
    value = eval(out.text, {"_np": np, "_pmax": lambda x, y: np.where(y > x, y, x), **arrays, "i": 1})
    if t.type in NP:
        assert np.asarray(value).dtype == NP[t.type], (text, out.text)
