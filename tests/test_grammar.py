"""The .loop parser: every construct of dsl.md becomes the IR written out by hand."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from shared_files import SHARED

from polymap import ir
from polymap.grammar import parse_program
from polymap.ir import (
    Assign,
    BinOp,
    BoolOp,
    Call,
    Compare,
    Const,
    If,
    Loop,
    Neg,
    Not,
    Ref,
    Select,
    Var,
)

ROOT = Path(__file__).resolve().parent.parent


def strip(x):
    """``x`` with every location replaced by NOWHERE, so IR compares by structure only."""
    if isinstance(x, tuple):
        return tuple(strip(e) for e in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, (ir.Loc, ir.SourceFile)):
        changes = {f.name: strip(getattr(x, f.name)) for f in dataclasses.fields(x) if f.init
                   if f.name not in ("loc", "step_loc", "source")}
        if any(f.name == "loc" for f in dataclasses.fields(x)):
            changes["loc"] = ir.NOWHERE
        return dataclasses.replace(x, **changes)
    return x


def kernel_of(text: str) -> ir.Kernel:
    (k,) = parse_program(text, "t.loop").kernels
    return k


def body_of(decls: str, body: str, params: str = "N = 8, M = 4") -> tuple[ir.Node, ...]:
    return strip(kernel_of(f"kernel k({params}) {{\n{decls}\n{body}\n}}\n").body)


def rhs(expr: str, decls: str = "in A[N, N]\nin s\nout x") -> ir.Expr:
    """The IR of ``expr`` as the right-hand side of ``x = expr`` inside loops i, j."""
    (loop,) = body_of(decls, f"for i in 0..N, j in 0..N {{ x = {expr} }}")
    return loop.body[0].body[0].value


GEMM = """\
# C = A @ B with an explicit initialisation
kernel gemm(M = 256, N = 256, K = 256) {
  in    A[M, K] : f32
  in    B[K, N] : f32
  out   C[M, N] : f32

  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""


def test_gemm_example_is_the_expected_ir():
    k = strip(kernel_of(GEMM))
    assert k.name == "gemm"
    assert k.params == (ir.Param("M", 256), ir.Param("N", 256), ir.Param("K", 256))
    assert k.where == ()
    assert k.decls == (
        ir.Decl("A", "in", (Var("M"), Var("K")), "f32"),
        ir.Decl("B", "in", (Var("K"), Var("N")), "f32"),
        ir.Decl("C", "out", (Var("M"), Var("N")), "f32"),
    )
    init = Assign("init", Ref("C", (Var("i"), Var("j"))), "=", Const(0))
    acc = Assign("acc", Ref("C", (Var("i"), Var("j"))), "+=",
                 BinOp("*", Ref("A", (Var("i"), Var("k"))), Ref("B", (Var("k"), Var("j")))))
    kloop = Loop("k", (Const(0),), (Var("K"),), 1, (acc,))
    assert k.body == (Loop("i", (Const(0),), (Var("M"),), 1,
                           (Loop("j", (Const(0),), (Var("N"),), 1, (init, kloop)),)),)


def test_locations_point_at_the_source():
    k = kernel_of(GEMM)
    assert (k.loc.line, k.loc.col) == (2, 1)
    assert (k.params[1].loc.line, k.params[1].loc.col) == (2, 22)
    a = k.decls[0]
    assert (a.loc.line, a.loc.col, a.loc.end_col) == (3, 3, 22)
    acc = k.statements()[1].stmt
    assert (acc.loc.line, acc.loc.col) == (10, 7)
    mul = acc.value
    assert (mul.loc.line, mul.loc.col, mul.loc.end_col) == (10, 23, 40)
    b_k = mul.rhs.indices[0]
    assert (b_k.loc.line, b_k.loc.col) == (10, 35)
    jloop = k.body[0].body[0]
    assert (jloop.loc.line, jloop.loc.col) == (7, 18)  # at the iterator of the second range
    assert jloop.loc.source is k.loc.source is mul.loc.source  # one SourceFile shared
    assert k.loc.source.name == "t.loop"


@pytest.mark.parametrize("path", sorted((ROOT / "examples").rglob("*.loop")), ids=lambda p: p.name)
def test_example_files_parse(path):
    program = parse_program(path.read_text(), str(path))
    assert program.kernels


def test_dsl_examples_parse_and_check():
    from polymap.driver import parse

    spec = SHARED / "spec" / "dsl.md"
    if not spec.exists():
        pytest.skip("spec not available")
    blocks = spec.read_text().split("```")[1::2]
    kernels = [b for b in blocks if b.lstrip().startswith("#") and "kernel " in b]
    assert len(kernels) == 3
    names = [parse("\n".join(kernels), "dsl.md").kernels[i].name for i in range(3)]
    assert names == ["gemm", "conv2d", "lu"]


def test_several_kernels_and_where_clause():
    prog = parse_program(
        "kernel a(N) where N >= 4 { out x\n x = 1 }\n\n"
        "kernel b(P, Q = 8) where P >= Q and Q >= 4 and P % 2 == 0 {\n local t : i64\n t = 0\n}", "t.loop")
    assert [k.name for k in prog.kernels] == ["a", "b"]
    a, b = (strip(k) for k in prog.kernels)
    assert a.where == (Compare(">=", Var("N"), Const(4)),)
    assert b.params == (ir.Param("P", None), ir.Param("Q", 8))
    assert b.where == (Compare(">=", Var("P"), Var("Q")), Compare(">=", Var("Q"), Const(4)),
                       Compare("==", BinOp("%", Var("P"), Const(2)), Const(0)))
    assert b.decls == (ir.Decl("t", "local", (), "i64"),)
    assert b.body == (Assign("S0", Ref("t"), "=", Const(0), explicit_label=False),)
    assert prog.kernel("b") is prog.kernels[1]


def test_declaration_roles_and_default_dtype():
    k = strip(kernel_of("kernel k(N) {\n in a[N] : f64\n out b[N, 2*N + 1]\n inout c : i32\n"
                        " local d[N]\n}"))
    assert k.decls == (
        ir.Decl("a", "in", (Var("N"),), "f64"),
        ir.Decl("b", "out", (Var("N"), BinOp("+", BinOp("*", Const(2), Var("N")), Const(1))), "f32"),
        ir.Decl("c", "inout", (), "i32"),
        ir.Decl("d", "local", (Var("N"),), "f32"),
    )
    assert k.body == ()


def test_one_line_block_and_semicolons():
    (loop,) = body_of("out x[N]", "for i in 0..N { S: x[i] = 0 }")
    assert loop == Loop("i", (Const(0),), (Var("N"),), 1, (Assign("S", Ref("x", (Var("i"),)), "=", Const(0)),))
    k = strip(kernel_of("kernel k(N) { out x[N]; out y[N]; for i in 0..N { x[i] = 0; y[i] = 1;; } }"))
    assert [d.name for d in k.decls] == ["x", "y"]
    assert [s.stmt.label for s in k.statements()] == ["S0", "S1"]


def test_newlines_inside_brackets_are_ignored():
    k = strip(kernel_of("kernel k(N,\n  M = 3\n) {\n in A[N,\n   M]\n out x\n"
                        "for i in 0..N, j in 0..M {\n  x += A[i,\n   j] * (1 +\n 2)\n }\n}"))
    assert k.params == (ir.Param("N"), ir.Param("M", 3))
    stmt = k.statements()[0].stmt
    assert stmt.value == BinOp("*", Ref("A", (Var("i"), Var("j"))), BinOp("+", Const(1), Const(2)))


def test_comments_blank_lines_and_braces_on_their_own_line():
    k = strip(kernel_of("# head\n\nkernel k(N)  # params\n{\n\n  out x  # scalar\n\n"
                        "  if N > 2  # cond\n  {\n    x = 1\n  }\n  else\n  {\n    x = 2\n  }\n}\n# tail\n"))
    assert k.body == (If(Compare(">", Var("N"), Const(2)),
                         (Assign("S0", Ref("x"), "=", Const(1), explicit_label=False),),
                         (Assign("S1", Ref("x"), "=", Const(2), explicit_label=False),)),)


def test_for_with_several_ranges_nests_them():
    (loop,) = body_of("out x[N, N]", "for i in 0..N, j in i..N step 2 { x[i, j] = 0 }")
    inner = Loop("j", (Var("i"),), (Var("N"),), 2, (Assign("S0", Ref("x", (Var("i"), Var("j"))), "=",
                                                            Const(0), explicit_label=False),))
    assert loop == Loop("i", (Const(0),), (Var("N"),), 1, (inner,))


def test_max_lower_and_min_upper_bounds_become_tuples():
    (outer,) = body_of("out x[N]", "for t in 0..N step 4 { for i in max(t, 1, M - 2)..min(t + 4, N) { x[i] = 0 } }")
    assert outer.step == 4
    inner = outer.body[0]
    assert inner.lower == (Var("t"), Const(1), BinOp("-", Var("M"), Const(2)))
    assert inner.upper == (BinOp("+", Var("t"), Const(4)), Var("N"))


def test_quasi_affine_subscripts_and_conditions():
    (loop,) = body_of("in X[N]\nout Y[2*N]", "for i in 0..2*N { if (i + 1) % 2 == 1 or not i < 3 and i != 5 "
                      "{ Y[i] = X[floor(i / 2)] } }")
    cond = loop.body[0].cond
    assert cond == BoolOp("or", (
        Compare("==", BinOp("%", BinOp("+", Var("i"), Const(1)), Const(2)), Const(1)),
        BoolOp("and", (Not(Compare("<", Var("i"), Const(3))), Compare("!=", Var("i"), Const(5)))),
    ))
    read = loop.body[0].then[0].value
    assert read == Ref("X", (Call("floor", (BinOp("/", Var("i"), Const(2)),)),))


def test_else_if_is_a_nested_if():
    (node,) = body_of("out x", "if N < 2 { x = 1 } else if N < 4 { x = 2 } else { x = 3 }")
    assert isinstance(node.orelse[0], If) and len(node.orelse) == 1
    assert node.orelse[0].cond == Compare("<", Var("N"), Const(4))
    assert node.orelse[0].orelse[0].label == "S2"


@pytest.mark.parametrize("op", ["=", "+=", "-=", "*=", "/=", "max=", "min="])
def test_assignment_operators(op):
    (stmt,) = body_of("out x", f"lbl: x {op} 1")
    assert stmt == Assign("lbl", Ref("x"), op, Const(1))


def test_literals():
    assert rhs("3") == Const(3) and isinstance(rhs("3").value, int)
    assert rhs("0.5") == Const(0.5)
    assert rhs("1e-3") == Const(1e-3)
    assert rhs("2.") == Const(2.0) and isinstance(rhs("2.").value, float)
    assert rhs(".25") == Const(0.25)
    assert rhs("1E+2") == Const(100.0)


def test_precedence_is_pythons():
    i, j, one, two = Var("i"), Var("j"), Const(1), Const(2)
    assert rhs("1 + 2 * i") == BinOp("+", one, BinOp("*", two, i))
    assert rhs("(1 + 2) * i") == BinOp("*", BinOp("+", one, two), i)
    assert rhs("i - j - 1") == BinOp("-", BinOp("-", i, j), one)
    assert rhs("i / j % 2") == BinOp("%", BinOp("/", i, j), two)
    assert rhs("-i * j") == BinOp("*", Neg(i), j)
    assert rhs("- -i") == Neg(Neg(i))
    assert rhs("+i") == i
    assert rhs("i + 1 < j * 2") == Compare("<", BinOp("+", i, one), BinOp("*", j, two))
    assert rhs("i < 1 or i > 2 and not j == 1") == BoolOp("or", (
        Compare("<", i, one), BoolOp("and", (Compare(">", i, two), Not(Compare("==", j, one))))))
    assert rhs("i < 1 or j < 1 or i > j") == BoolOp("or", (Compare("<", i, one), Compare("<", j, one),
                                                            Compare(">", i, j)))


def test_names_refs_calls_and_select():
    i, j = Var("i"), Var("j")
    # a bare declared tensor is a 0-d reference; iterators and parameters are values
    assert rhs("s * N + i") == BinOp("+", BinOp("*", Ref("s"), Var("N")), i)
    assert rhs("A[i, j]") == Ref("A", (i, j))
    for f in ("sqrt", "exp", "log", "abs", "floor"):
        assert rhs(f"{f}(A[i, j])") == Call(f, (Ref("A", (i, j)),))
    assert rhs("pow(s, 2)") == Call("pow", (Ref("s"), Const(2)))
    assert rhs("max(s, 0, i)") == Call("max", (Ref("s"), Const(0), i))
    assert rhs("select(i < j, s, 0.0)") == Select(Compare("<", i, j), Ref("s"), Const(0.0))
    assert rhs("floor(i / 4)") == Call("floor", (BinOp("/", i, Const(4)),))


def test_unlabelled_statements_count_every_statement():
    k = kernel_of("kernel k(N) {\n out x\n x = 0\n a: x = 1\n for i in 0..N {\n x += 1\n"
                  " if i > 2 { b: x = 2 } else { x = 3 }\n }\n x = 4\n}")
    labels = [(s.stmt.label, s.stmt.explicit_label) for s in k.statements()]
    assert labels == [("S0", False), ("a", True), ("S2", False), ("b", True), ("S4", False), ("S5", False)]


def test_keywords_are_not_names_but_prefixes_are():
    (stmt,) = body_of("out in_x\nout for2", "for2 = in_x + 1")
    assert stmt.target == Ref("for2") and stmt.value == BinOp("+", Ref("in_x"), Const(1))


def test_negative_and_non_constant_steps_are_kept_for_semantics():
    (loop,) = body_of("out x[N]", "for i in 0..N step -2 { x[i] = 0 }")
    assert loop.step == -2
    k = kernel_of("kernel k(N) { out x[N]\n for i in 0..N step N { x[i] = 0 } }")
    assert k.body[0].step == 0  # not a constant: semantics reports it at step_loc
    assert (k.body[0].step_loc.line, k.body[0].step_loc.col) == (2, 21)


# --------------------------------------------------------------------------- precedence, checked by Python itself

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from polymap.evaluate import eval_int, eval_int_condition

_atoms = st.sampled_from(["i", "j", "N", "0", "1", "3", "12"])


def _combine(children):
    binary = st.tuples(children, st.sampled_from([" + ", " - ", " * ", "+", "-", "*"]), children).map("".join)
    return st.one_of(binary, children.map(lambda e: f"-{e}"), children.map(lambda e: f"(\n{e}\n)"))


_int_exprs = st.recursive(_atoms, _combine, max_leaves=8)
_conditions = st.recursive(
    st.tuples(_int_exprs, st.sampled_from([" < ", " <= ", " > ", " >= ", " == ", " != "]), _int_exprs).map("".join),
    lambda c: st.one_of(st.tuples(c, st.sampled_from([" and ", " or "]), c).map("".join),
                        c.map(lambda e: f"not {e}"), c.map(lambda e: f"({e})")),
    max_leaves=4)


@settings(max_examples=150, deadline=None)
@given(_int_exprs, _conditions)
def test_expressions_mean_what_python_says(expr, cond):
    """+ - * unary -, comparisons and and/or/not have Python's precedence and associativity."""
    env = {"i": 5, "j": -2, "N": 7}
    k = kernel_of(f"kernel k(N) {{ out x\n for i in 0..N, j in 0..N {{ x = {expr}\n if {cond} {{ x = 1 }} }} }}")
    inner = k.body[0].body[0]
    assert eval_int(inner.body[0].value, env) == eval(expr.replace("\n", " "), {}, dict(env))
    assert eval_int_condition(inner.body[1].cond, env) == eval(cond.replace("\n", " "), {}, dict(env))
