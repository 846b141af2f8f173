"""Brute-force legality: enumerate instances, compare reaching and final writers.

Independent of ISL: instances come from ``iterate_statement_instances``,
elements from evaluating subscripts, and the new order from the mapping's
tile-coordinate formulas (``mapping.md``) evaluated in Python.
"""
from __future__ import annotations

from polymap import ir
from polymap.evaluate import eval_int, iterate_statement_instances


def instances(kernel: ir.Kernel, params: dict[str, int], nest: int | None = 0):
    """``[(ctx, env, reads, write)]`` in original order; ``reads``: ``[(tensor, element)]``."""
    out = []
    for ctx, env in iterate_statement_instances(kernel, params):
        if nest is not None and ctx.nest != nest:
            continue
        reads = [(r.tensor, tuple(eval_int(e, env) for e in r.indices)) for r in ir.reads_of(ctx.stmt)]
        t = ctx.stmt.target
        write = (t.tensor, tuple(eval_int(e, env) for e in t.indices))
        out.append((ctx, dict(env), reads, write))
    return out


def _phase(kernel: ir.Kernel, ctx: ir.StatementContext, loop: str, nest: int) -> int:
    if loop in ctx.iterators:
        return 1
    positions = []

    def walk(nodes, pos):
        for k, n in enumerate(nodes):
            here = pos + (k,)
            if isinstance(n, ir.Loop):
                if n.var == loop:
                    positions.append(here)
                walk(n.body, here)
            elif isinstance(n, ir.If):
                walk(n.then, here + (0,))
                walk(n.orelse, here + (1,))

    top = [k for k, n in enumerate(kernel.body) if isinstance(n, ir.Loop)][nest]
    if kernel.body[top].var == loop:
        positions.append((top,))
    walk(kernel.body[top].body, (top,))
    return 0 if positions and all(ctx.position < p for p in positions) else 2


def time_key(kernel: ir.Kernel, mapping, ctx, env, rank: dict[str, int], partial: set[str]):
    """The mapped time vector of one instance, straight from ``mapping.md``."""
    key = []
    n = len(mapping.levels)
    for l, lv in enumerate(mapping.levels):
        for x in lv.order:
            if x in partial:
                key.append(_phase(kernel, ctx, x, mapping.nest))
            if x not in ctx.iterators:
                key.append(0)
                continue
            k = mapping.loops.index(x)
            tiles = [mapping.levels[m].tile[k] for m in range(n)] + [1]
            r = env[x]
            for m in range(l):  # residue inside the level-l tile
                if tiles[m + 1] is not None:
                    r %= tiles[m + 1]
            size = tiles[l + 1]
            key.append(0 if size is None else r // size)
    key.append(rank[ctx.name])
    return tuple(key)


def writers(seq):
    """Reaching writer per (instance id, read index) and final writer per element."""
    last: dict = {}
    reach = {}
    for uid, reads, write in seq:
        for k, el in enumerate(reads):
            reach[(uid, k)] = last.get(el)
        last[write] = uid
    return reach, last


def brute_legal(kernel: ir.Kernel, mapping, params: dict[str, int]):
    """``(legal, original positions, new positions, instance table)`` by enumeration."""
    insts = instances(kernel, params, mapping.nest)
    stmts = [c for c in kernel.statements() if c.nest == mapping.nest]
    rank = {c.name: k for k, c in enumerate(stmts)}
    partial = {x for x in mapping.loops if any(x not in c.iterators for c in stmts)}
    ids = [(c.name, tuple(env[v] for v in c.iterators)) for c, env, _, _ in insts]
    keys = [time_key(kernel, mapping, c, env, rank, partial) for c, env, _, _ in insts]
    assert len(set(keys)) == len(keys), "mapped schedule is not injective"
    order = sorted(range(len(insts)), key=lambda k: keys[k])
    orig = [(ids[k], insts[k][2], insts[k][3]) for k in range(len(insts))]
    new = [orig[k] for k in order]
    legal = writers(orig) == writers(new)
    pos_orig = {ids[k]: k for k in range(len(ids))}
    pos_new = {ids[k]: n for n, k in enumerate(order)}
    table = {ids[k]: (insts[k][2], insts[k][3]) for k in range(len(ids))}
    return legal, pos_orig, pos_new, table


def witness_is_real(kernel, mapping, params, violation_json) -> bool:
    """The witness pair shares the element (one of them writing it) and its order flips."""
    w = violation_json["witness"]
    vals = {**params, **w.get("params", {})}
    _, pos_o, pos_n, table = brute_legal(kernel, mapping, vals)
    (sa, a), = w["source"].items()
    (sb, b), = w["sink"].items()
    ia = (sa, tuple(a.values()))
    ib = (sb, tuple(b.values()))
    if ia not in table or ib not in table:
        return False
    el = (violation_json["tensor"], tuple(w["element"]))
    ra, wa = table[ia]
    rb, wb = table[ib]
    touches_a, touches_b = el in ra or wa == el, el in rb or wb == el
    writes = wa == el or wb == el
    return touches_a and touches_b and writes and pos_o[ia] < pos_o[ib] and pos_n[ib] < pos_n[ia]
