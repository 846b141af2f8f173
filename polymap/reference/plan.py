"""Deciding, on concrete indices, whether a loop may run statement by statement on arrays.

:func:`plan_region` enumerates every statement instance of a loop (original
order, as int64 arrays of iterator values), evaluates every subscript, and
checks the conditions of :mod:`polymap.reference.vector` exactly, element by
element. It never changes a tensor; it raises :class:`Fallback` (or returns
None when the loop is too large to hold as arrays) and the caller then runs
the loop instance by instance::

    for i in 1..N { A[i] = A[i-1] + 1 }   ->  Fallback: instance i reads what i-1 writes
    for i in 0..N { s += A[i] }           ->  one group (s), N terms folded in order of i
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from polymap.reference.vector_values import LIMIT, Fallback, VEnv
from polymap.reference.vector_tree import IfNode, LoopNode
from polymap.reference.index import Context


@dataclass
class StatementInstances:
    """The instances of one statement in a region, in original order."""

    node: object  # vector_tree.StmtNode
    venv: dict  # name -> (value, lo, hi), arrays of length n
    n: int
    comps: list  # schedule components: ("c", position) or ("v", iterator, lo, hi)
    target_flat: np.ndarray | None = None
    read_flats: tuple = ()
    #: None when every instance writes its own element; else (elements, order, counts):
    #: the instances grouped by element (``order`` sorts them, None if already grouped).
    groups: tuple | None = None


@dataclass
class Plan:
    statements: list[StatementInstances]
    instances: int
    last_values: dict = field(default_factory=dict)  # iterators as the scalar loops leave them


class _TooBig(Exception):
    pass


def plan_region(tree: tuple, env: dict, ctx: Context, cap: int, least: int = 0) -> Plan | None:
    """The statements of ``tree`` (a loop) with their instances, if distribution is exact.

    None when there are more than ``cap`` or fewer than ``least`` instances.
    """
    venv = {k: (v, v, v) for k, v in env.items() if isinstance(v, int)}
    plan = Plan([], 0)
    try:
        _walk(tree, venv, 1, [], 0, plan, cap)
    except _TooBig:
        return None
    if plan.instances < least:
        return None
    for s in plan.statements:
        node = s.node
        s.target_flat = _flat(node.target_index, ctx.shapes[node.stmt.target.tensor], s.venv, s.n)
        s.read_flats = tuple(_flat(fns, ctx.shapes[r.tensor], s.venv, s.n)
                             for r, fns in zip(node.refs, node.ref_index))
        _classify(s, _size(ctx, node.stmt.target.tensor))
    if len(plan.statements) > 1:
        _check_distribution(plan.statements, ctx)
    return plan


# --------------------------------------------------------------------------- enumeration


def _walk(nodes: tuple, venv: VEnv, n: int, comps: list, depth: int, plan: Plan, cap: int) -> None:
    for pos, node in enumerate(nodes):
        here = comps + [("c", pos)]
        if isinstance(node, LoopNode):
            _expand(node, venv, n, here, depth, plan, cap)
        elif isinstance(node, IfNode):
            mask = node.cond(venv)
            if not isinstance(mask, np.ndarray):
                _walk(node.then if mask else node.orelse, venv, n, here + [("c", 0 if mask else 1)],
                      depth, plan, cap)
                continue
            for branch, keep, b in ((node.then, mask, 0), (node.orelse, ~mask, 1)):
                idx = np.flatnonzero(keep)
                if branch and len(idx):
                    sub = {k: ((v[idx], lo, hi) if isinstance(v, np.ndarray) else (v, lo, hi))
                           for k, (v, lo, hi) in venv.items()}
                    _walk(branch, sub, len(idx), here + [("c", b)], depth, plan, cap)
        else:
            plan.statements.append(StatementInstances(node, venv, n, here))
            plan.instances += n


def _expand(node: LoopNode, venv: VEnv, n: int, comps: list, depth: int, plan: Plan, cap: int) -> None:
    (lo, lo_min, lo_max), (hi, hi_min, hi_max), step = node.lower(venv), node.upper(venv), node.step
    if max(-lo_min, lo_max, -hi_min, hi_max) > LIMIT // 2:
        raise Fallback("loop bounds too large")
    if any(c[0] == "v" and c[1] == node.var for c in comps):
        raise Fallback("a loop reuses an enclosing iterator's name")
    if isinstance(lo, int) and isinstance(hi, int):
        length = len(range(lo, hi, step))
        total = n * length
        if total == 0:
            return
        _spend(plan, total, cap)
        first, last = lo, lo + step * (length - 1)
        values = np.arange(length, dtype=np.int64) * step + lo
        var = np.tile(values, n) if n > 1 else values
        counts = length
    else:
        lo, hi = np.broadcast_to(lo, (n,)), np.broadcast_to(hi, (n,))
        if step > 0:
            counts = np.maximum(0, (hi - lo + (step - 1)) // step)
        else:
            counts = np.maximum(0, (lo - hi + (-step - 1)) // -step)
        total = int(counts.sum())
        if total == 0:
            return
        _spend(plan, total, cap)
        live = counts > 0
        first, last = (int(lo[live].min()), int(hi[live].max()) - 1) if step > 0 else (
            int(hi[live].min()) + 1, int(lo[live].max()))
        local = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        var = np.repeat(lo, counts) + step * local
    sub = {k: ((np.repeat(v, counts), a, b) if isinstance(v, np.ndarray) else (v, a, b))
           for k, (v, a, b) in venv.items()}
    v_lo, v_hi = min(first, last), max(first, last)
    sub[node.var] = (var, v_lo, v_hi)
    plan.last_values.setdefault(node.var, None)  # outer iterators first, as the loops bind them
    _walk(node.body, sub, total, comps + [("v", node.var, v_lo, v_hi)], depth + 1, plan, cap)
    plan.last_values[node.var] = int(var[-1])


def _spend(plan: Plan, total: int, cap: int) -> None:
    plan.budget = getattr(plan, "budget", 0) + total
    if plan.budget > cap:
        raise _TooBig


def _flat(fns: tuple, shape: tuple[int, ...], venv: dict, n: int) -> np.ndarray:
    """Row-major element numbers of a reference for every instance (all inside the shape)."""
    if len(fns) != len(shape):
        raise Fallback("rank mismatch")
    flat, stride = 0, 1
    for f, dim in zip(reversed(fns), reversed(shape)):
        v, lo, hi = f(venv)
        if not (0 <= lo and hi < dim):  # the bounds are conservative: look at the values
            low, high = (int(v.min()), int(v.max())) if isinstance(v, np.ndarray) else (v, v)
            if low < 0 or high >= dim:
                raise Fallback("access outside the tensor")
        if stride == 1:
            flat = v if isinstance(flat, int) and flat == 0 else v + flat
        else:
            flat = v * stride + flat
        stride *= dim
    if isinstance(flat, np.ndarray) and flat.shape == (n,):
        return flat.astype(np.int64, copy=False)
    return np.full(n, flat, np.int64)


def _size(ctx: Context, tensor: str) -> int:
    return int(np.prod(ctx.shapes[tensor], dtype=np.int64))


# --------------------------------------------------------------------------- one statement


def _dense(size: int, n: int) -> bool:
    return size <= 8 * n + 4096


def _classify(s: StatementInstances, size: int) -> None:
    """Distinct targets and no foreign reads (groups None), or a reduction's groups, or Fallback."""
    t, n, node = s.target_flat, s.n, s.node
    same = [f for r, f in zip(node.refs, s.read_flats) if r.tensor == node.stmt.target.tensor]
    if n == 1:
        return
    # Consecutive instances on one element are cheap evidence of a reduction.
    if not np.any(t[1:] == t[:-1]) and _distinct_targets(t, n, size, same):
        return
    if node.combine is None:
        raise Fallback("several instances assign the same element")
    for f in same:
        if np.any(np.isin(f, t)):
            raise Fallback("a reduction reads an element it updates")
    s.groups = _groups(t, n, size)


def _distinct_targets(t: np.ndarray, n: int, size: int, reads: list[np.ndarray]) -> bool:
    """Whether the targets are pairwise distinct; then Fallback if an instance reads another's."""
    idx = np.arange(n)
    if _dense(size, n):
        owner = np.full(size, -1, np.int64)
        owner[t] = idx
        if not np.array_equal(owner[t], idx):
            return False
        foreign = [np.any((o != -1) & (o != idx)) for o in (owner[f] for f in reads)]
    else:
        order = np.argsort(t, kind="stable")
        ts = t[order]
        if np.any(ts[1:] == ts[:-1]):
            return False
        foreign = []
        for f in reads:
            pos = np.minimum(np.searchsorted(ts, f), n - 1)
            foreign.append(np.any((ts[pos] == f) & (order[pos] != idx)))
    if any(foreign):
        raise Fallback("an instance reads what another one writes")
    return True


def _groups(t: np.ndarray, n: int, size: int) -> tuple:
    """The instances grouped by element, each group in original order."""
    starts = np.concatenate([[0], np.flatnonzero(t[1:] != t[:-1]) + 1])
    keys = t[starts]
    if _distinct(keys, size):  # contiguous runs (the reduction loop is innermost)
        return keys, None, np.diff(np.append(starts, n))
    repeats = np.flatnonzero(t == t[0])
    period = int(repeats[1]) if len(repeats) > 1 else 0
    if period and n % period == 0:  # the reduction loop is outside: a periodic pattern
        rows = t.reshape(-1, period)
        if np.all(rows == rows[0]) and _distinct(rows[0], size):
            order = np.arange(n).reshape(-1, period).T.ravel()
            return rows[0].copy(), order, np.full(period, n // period)
    order = np.argsort(t, kind="stable")
    ts = t[order]
    starts = np.concatenate([[0], np.flatnonzero(ts[1:] != ts[:-1]) + 1])
    return ts[starts], order, np.diff(np.append(starts, n))


def _distinct(keys: np.ndarray, size: int) -> bool:
    if _dense(size, len(keys)):
        return bool(np.bincount(keys, minlength=size).max(initial=0) <= 1)
    return len(np.unique(keys)) == len(keys)


# --------------------------------------------------------------------------- between statements


def _check_distribution(stmts: list[StatementInstances], ctx: Context) -> None:
    """Every conflicting pair of instances of two statements runs textually-first first."""
    by_tensor: dict[str, list[tuple[int, bool, list[np.ndarray]]]] = {}
    for k, s in enumerate(stmts):
        target = s.node.stmt.target.tensor
        for r, f in zip(s.node.refs, s.read_flats):
            by_tensor.setdefault(r.tensor, []).append((k, False, f))
        by_tensor.setdefault(target, []).append((k, True, s.target_flat))
    keys: list | None = None
    for tensor, accesses in by_tensor.items():
        writers = {k for k, w, _ in accesses if w}
        users = sorted({k for k, _, _ in accesses})
        if not writers or len(users) < 2:
            continue
        if keys is None:
            keys = _schedule_keys(stmts)
        size = _size(ctx, tensor)
        for i, a in enumerate(users):
            for b in users[i + 1:]:
                mine = [(w, f) for k, w, f in accesses if k == a]
                theirs = [(w, f) for k, w, f in accesses if k == b]
                checks = []
                if a in writers:
                    checks.append(([f for w, f in mine if w], [f for _, f in theirs]))
                if b in writers:
                    checks.append(([f for _, f in mine], [f for w, f in theirs if w]))
                if len(checks) == 2 and all(len(x) == len(y) and all(p is q for p, q in zip(x, y))
                                            for x, y in zip(*checks)):
                    checks.pop()  # no reads of the tensor: both checks are the same
                for first, then in checks:
                    _ordered(first, keys[a], then, keys[b], size)


def _ordered(first: list, first_key: np.ndarray, then: list, then_key: np.ndarray,
             size: int) -> None:
    """Fallback unless every element's accesses in ``first`` precede those in ``then``."""
    f1, f2 = _cat(first), _cat(then)
    k1, k2 = np.tile(first_key, len(first)), np.tile(then_key, len(then))
    if _dense(size, len(f1) + len(f2)):
        latest = np.full(size, -1, np.int64)
        np.maximum.at(latest, f1, k1)
        bad = np.any(latest[f2] > k2)
    else:
        u, inv = np.unique(f1, return_inverse=True)
        latest = np.full(len(u), -1, np.int64)
        np.maximum.at(latest, inv, k1)
        pos = np.minimum(np.searchsorted(u, f2), len(u) - 1)
        bad = np.any((u[pos] == f2) & (latest[pos] > k2))
    if bad:
        raise Fallback("statements conflict out of textual order")


def _cat(arrays: list[np.ndarray]) -> np.ndarray:
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _schedule_keys(stmts: list[StatementInstances]) -> list[np.ndarray]:
    """Each instance's position in the original order, as one int64 per instance.

    The schedule vectors (iterators and textual positions, interleaved) are
    read as mixed-radix numbers; two statements' vectors differ at a textual
    position before either ends, so missing trailing components may count 0.
    """
    depth = max(len(s.comps) for s in stmts)
    lo, hi = [None] * depth, [None] * depth
    for s in stmts:
        for d, c in enumerate(s.comps):
            a, b = (c[1], c[1]) if c[0] == "c" else (c[2], c[3])
            lo[d] = a if lo[d] is None else min(lo[d], a)
            hi[d] = b if hi[d] is None else max(hi[d], b)
    weights, w = [0] * depth, 1
    for d in reversed(range(depth)):
        weights[d] = w
        w *= hi[d] - lo[d] + 1
    if w > LIMIT:
        raise Fallback("schedule too large for int64 keys")
    out = []
    for s in stmts:
        key = np.zeros(s.n, np.int64)
        for d, c in enumerate(s.comps):
            value = c[1] if c[0] == "c" else s.venv[c[1]][0]
            key += (value - lo[d]) * weights[d]
        out.append(key)
    return out
