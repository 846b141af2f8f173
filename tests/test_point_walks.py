"""How isl's candidates walk the points of a tile (``isl_schedule.point_walks``), against brute force.

The rule's three facts about a walk are recomputed here by enumerating instances, without ISL:
whether its innermost loop carries a *recurrence* (a statement reads, other than through an
update's accumulator, what an earlier iteration of it wrote), whether it carries any conflict
(two conflicting instances agree on every loop before it and differ in it), and whether every
access moves by 0 or +1 in its last subscript (the others fixed) from one iteration of it to the
next. The walks it picks are legal (``check`` equals brute-force legality, here and in
``test_schedule_kernels.py``'s cases).
"""
from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from bruteforce import brute_legal, instances
from polymap.driver import parse
from polymap import ir
from polymap.machine.presets import load_architecture
from polymap.passes.frontend.rename import distinct_loop_names
from polymap.passes.legality.legality import check_mapping
from polymap.passes.search.isl_schedule import (PointWalk, describe, distributed, isl_mappings,
                                                 isl_schedule, point_walks)
from polymap.poly import build_model

ROOT = Path(__file__).resolve().parent.parent
SIZES = {"seidel-2d": {"TSTEPS": 3, "N": 7}, "lu": {"N": 7}, "jacobi-2d": {"TSTEPS": 3, "N": 6},
         "fdtd-2d": {"TMAX": 2, "NX": 4, "NY": 5}, "cholesky": {"N": 7}}


def _setup(name: str):
    k = distinct_loop_names(parse((ROOT / "examples" / "polybench" / f"{name}.loop").read_text(), f"{name}.loop").kernels[0])
    model = build_model(k)
    sched = isl_schedule(model, 0)
    return k, model, distributed(model, sched) or sched


def _coords(sched, ctx, env, params) -> dict[str, int]:
    """The instance's value of every loop of the schedule (its entry's expressions, evaluated)."""
    entry = next(e for e in sched.entries if e.statement == ctx.name)
    values = {**params, **env}
    return {x: _eval(text, values) for x, text in zip(entry.loops, entry.exprs)}


def _eval(text: str, values: dict[str, int]) -> int:
    """An affine schedule expression such as ``2*t + i + 1`` (integers, names, ``*``, ``+``, ``-``)."""
    return int(eval(text, {"__builtins__": {}}, dict(values)))  # test-only: the texts are isl's affine forms


def _keys(walk: PointWalk, c: dict[str, int]) -> tuple[int, ...]:
    a, b = walk.wavefront or (None, None)
    return tuple(c[x] + c[b] if x == a else c[x] for x in walk.order)


def _brute(name: str):
    k, model, sched = _setup(name)
    params = SIZES[name]
    inst = instances(k, params)
    coords = [_coords(sched, ctx, env, params) for ctx, env, _, _ in inst]
    return k, model, sched, params, inst, coords


def _conflicts(inst, chains: bool):
    """Pairs (p, q), p earlier in the original order, that touch one element, one writing it; with
    ``chains`` only p's write read by q of the same statement, other than through its accumulator."""
    out = []
    for p, q in itertools.combinations(range(len(inst)), 2):
        (cp, _, rp, wp), (cq, _, rq, wq) = inst[p], inst[q]
        if chains:
            if cp.name != cq.name:
                continue
            acc = [r == cq.stmt.target for r in ir.reads_of(cq.stmt)]
            if any(el == wp and not a for el, a in zip(rq, acc)):
                out.append((p, q))
        elif wp == wq or wp in rq or wq in rp:
            out.append((p, q))
    return out


def _carried(walk: PointWalk, coords, pairs) -> bool:
    k = walk.order.index(walk.innermost)
    for p, q in pairs:
        kp, kq = _keys(walk, coords[p]), _keys(walk, coords[q])
        if kp[:k] == kq[:k] and kp[k] != kq[k]:
            return True
    return False


def _next_pairs(walk: PointWalk, inst, coords):
    """``(n, m)``: instance m is instance n's statement one iteration of the walk's innermost loop later."""
    at = {(inst[n][0].name, tuple(sorted(c.items()))): n for n, c in enumerate(coords)}
    for n, c in enumerate(coords):
        nxt = dict(c)
        nxt[walk.innermost] += 1
        if walk.wavefront:
            nxt[walk.wavefront[0]] -= 1
        m = at.get((inst[n][0].name, tuple(sorted(nxt.items()))))
        if m is not None:
            yield n, m


def _reduces(walk: PointWalk, inst, coords) -> bool:
    """Some update (its target among its reads) keeps its target from every iteration to the next."""
    kept: dict[str, bool] = {}
    for n, m in _next_pairs(walk, inst, coords):
        ctx = inst[n][0]
        if ctx.stmt.is_reduction or ctx.stmt.target in ir.reads_of(ctx.stmt):
            kept[ctx.name] = kept.get(ctx.name, True) and inst[n][3] == inst[m][3]
    return any(kept.values())


def _stores_unit(walk: PointWalk, inst, coords) -> bool:
    for n, m in _next_pairs(walk, inst, coords):
        d = tuple(b - a for a, b in zip(inst[n][3][1], inst[m][3][1]))  # (tensor, element) of the write
        if any(d[:-1]) or (d and d[-1] not in (0, 1)):
            return False
    return True


def _unit(walk: PointWalk, inst, coords) -> bool:
    for n, m in _next_pairs(walk, inst, coords):
        (_, _, r0, w0), (_, _, r1, w1) = inst[n], inst[m]
        for (_, e0), (_, e1) in zip(r0 + [w0], r1 + [w1]):
            d = tuple(b - a for a, b in zip(e0, e1))
            if any(d[:-1]) or (d and d[-1] not in (0, 1)):
                return False
    return True


@pytest.mark.parametrize("name", sorted(SIZES))
def test_walk_facts_equal_brute_force(name):
    k, model, sched, params, inst, coords = _brute(name)
    walks = point_walks(model, sched)
    own = walks[0]
    assert own.order == sched.loops and not own.wavefront
    every, chains = _conflicts(inst, chains=False), _conflicts(inst, chains=True)
    for w in walks:
        assert w.chain == _carried(w, coords, chains), w
        assert w.carried == _carried(w, coords, every), w
        assert w.unit == _unit(w, inst, coords), w
        assert w.reduces == _reduces(w, inst, coords), w
        assert w.stores_unit == _stores_unit(w, inst, coords), w
    if not own.chain and own.unit and not own.reduces:
        assert len(walks) == 1  # nothing to improve
    for w in walks[1:]:  # better on recurrence, strided stores, accumulator chains or strides, in that order
        assert (w.chain, not w.stores_unit, w.reduces, not w.unit) < (own.chain, not own.stores_unit, own.reduces, not own.unit), w
    assert [w.rank for w in walks[1:]] == sorted(w.rank for w in walks[1:])


def test_seidel_lu_and_jacobi_as_the_rule_says():
    """seidel-2d's ``A[i][j-1]`` is a recurrence along ``2t + i + j``: its points are walked by
    the diagonals of the last two band loops (every other band loop innermost meets a neighbour's
    dependence, and strided). lu's own walk has ``k`` innermost, a reduction (its accumulator is no
    recurrence) reading ``A[k][j]`` with stride N: the first legal unit-stride walk has ``j``
    innermost, ``i`` then ``k`` outside it, the statements after (``s0 s3 s1 s2``: ``l_div(i, k)``
    still runs before the ``l_acc(i, j, k)`` that read ``A[i][k]``). jacobi-2d's distributed
    sweeps are unit-stride and carry nothing: their walk stays."""
    host = load_architecture("host")
    _, model, sched = _setup("seidel-2d")
    walks = point_walks(model, sched)
    assert walks[0].chain and [w.wavefront for w in walks[1:]] == [("s1", "s2")]
    k, model, _ = _setup("lu")
    for source, m in isl_mappings(model, 0, host, {}):
        assert source.endswith("points in order s0 s3 s1 s2"), source
        assert m.levels[-2].order == ("s0", "s3", "s1", "s2")
        assert check_mapping(model, m).legal
        small = dataclasses.replace(m, levels=tuple(
            dataclasses.replace(lv, tile=tuple(t if t is None else min(t, 3) for t in lv.tile)) for lv in m.levels))
        assert brute_legal(k, small, {"N": 8})[0] and check_mapping(model, small, params={"N": 8}).legal
        assert any("points of each tile are walked in the order s0, s3, s1, s2" in line for line in describe(m, model))
    _, model, sched = _setup("jacobi-2d")
    assert len(point_walks(model, sched)) == 1


def test_cholesky_walks_its_points_without_the_accumulator_chain():
    """cholesky's own walk has ``k`` innermost: unit stride, but ``A[i][j] -= A[i][k] * A[j][k]``
    keeps one accumulator, each iteration waiting for the last subtraction. ``j`` innermost
    (``s0 s3 s1 s2``: ``i``, ``k``, then ``j``) stores unit-stride and reads ``A[j][k]`` strided, no
    chain: it replaces the own walk, and is legal by brute force at tiles that divide nothing."""
    k, model, sched = _setup("cholesky")
    own, *others = point_walks(model, sched)
    assert own.reduces and own.unit and own.stores_unit and not own.chain
    assert others and not others[0].reduces and others[0].stores_unit and not others[0].unit
    host = load_architecture("host")
    for source, m in isl_mappings(model, 0, host, {}):
        assert source.endswith("points in order s0 s3 s1 s2"), source
        small = dataclasses.replace(m, levels=tuple(
            dataclasses.replace(lv, tile=tuple(t if t is None else min(t, 3) for t in lv.tile)) for lv in m.levels))
        assert brute_legal(k, small, {"N": 8})[0] and check_mapping(model, small, params={"N": 8}).legal


@pytest.mark.parametrize("tile", [(2, 3, 4), (3, 2, 5)])
def test_seidel_walked_by_diagonals_is_legal_by_brute_force(tile):
    """The walk isl_mappings picks for seidel-2d, at tiles that divide nothing: ``check`` says
    legal and brute force agrees."""
    k, model, sched = _setup("seidel-2d")
    (_, m), *_ = isl_mappings(model, 0, load_architecture("host"), {})
    levels = [dataclasses.replace(lv, tile=tile) if lv.tile[0] is not None and lv.tile[0] > 1 else lv
              for lv in m.levels]
    m = dataclasses.replace(m, levels=tuple(levels))
    params = {"TSTEPS": 4, "N": 8}
    assert check_mapping(model, m, params=params).legal
    assert brute_legal(k, m, params)[0]
