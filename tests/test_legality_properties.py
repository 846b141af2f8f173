"""Hypothesis: random small nests, orders and tiles; check == brute force, witnesses real."""
from __future__ import annotations

from types import SimpleNamespace as NS

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bruteforce import brute_legal, witness_is_real
from polymap import ir
from polymap.passes.legality.legality import check_mapping
from polymap.poly import build_model

NAMES = ("i", "j", "k")
TENSORS = {"A": 2, "B": 1, "s": 0}


@st.composite
def subscript(draw, loops):
    terms = [ir.Var(x) for x in loops if draw(st.booleans())]
    e = ir.Const(draw(st.integers(-1, 1)))
    for t in terms:
        e = ir.BinOp("+", t, e)
    return e


@st.composite
def statement(draw, loops, label):
    def ref(name):
        return ir.Ref(name, tuple(draw(subscript(loops)) for _ in range(TENSORS[name])))

    target = ref(draw(st.sampled_from(sorted(TENSORS))))
    value = ir.BinOp("+", ref(draw(st.sampled_from(sorted(TENSORS)))), ir.Const(1))
    return ir.Assign(label, target, draw(st.sampled_from(["=", "+=", "max="])), value)


@st.composite
def kernels(draw):
    depth = draw(st.integers(2, 3))
    n_stmts = draw(st.integers(1, 3))
    places = sorted(draw(st.lists(st.tuples(st.integers(1, depth), st.booleans()), min_size=n_stmts,
                                  max_size=n_stmts)))
    triangular = draw(st.booleans())
    counter = iter(range(10))

    def body(d):  # the body of the loop at depth d (1-based)
        stmts_here = [p for p in places if p[0] == d]
        pre = [draw(statement(NAMES[:d], f"S{next(counter)}")) for p in stmts_here if not p[1] or d == depth]
        post = [draw(statement(NAMES[:d], f"S{next(counter)}")) for p in stmts_here if p[1] and d < depth]
        inner = [loop(d + 1)] if d < depth else []
        return tuple(pre + inner + post)

    def loop(d):
        var = NAMES[d - 1]
        lower = (ir.Var(NAMES[d - 2]),) if triangular and d == 2 else (ir.Const(0),)
        upper = (ir.Const(3),)
        return ir.Loop(var, lower, upper, 1, body(d))

    return ir.Kernel("rand", (), (), (), (loop(1),)), NAMES[:depth]


@st.composite
def cases(draw):
    kernel, loops = draw(kernels())
    order = tuple(draw(st.permutations(loops)))
    if draw(st.booleans()):
        levels = (NS(level="L0", tile=(None,) * len(loops), order=order, spatial=(), keep=()),)
    else:
        tiles = tuple(draw(st.sampled_from([None, 1, 2])) for _ in loops)
        inner = tuple(draw(st.permutations(loops)))
        levels = (NS(level="L0", tile=(None,) * len(loops), order=order, spatial=(), keep=()),
                  NS(level="L1", tile=tiles, order=inner, spatial=(), keep=()))
    return kernel, NS(kernel="rand", nest=0, loops=loops, levels=levels)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_check_equals_brute_force(case):
    kernel, mapping = case
    stmts = kernel.statements()
    assert stmts
    model = build_model(kernel)
    verdict = check_mapping(model, mapping, params={})
    legal, *_ = brute_legal(kernel, mapping, {})
    assert verdict.legal == legal, [v.reason for v in verdict.violations]
    for v in verdict.violations:
        assert witness_is_real(kernel, mapping, {}, v.to_json()), v.reason
