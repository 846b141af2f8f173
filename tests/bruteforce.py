"""Brute-force legality: enumerate instances, compare reaching and final writers.

Independent of ISL: instances come from ``iterate_statement_instances``,
elements from evaluating subscripts, and the new order from the mapping's
tile-coordinate formulas (``mapping.md``) evaluated in Python.
"""
from __future__ import annotations

from polymap import ir
from polymap.evaluate import eval_int, iterate_statement_instances

from mapped_time import TimeKeys, mapped_nests


def instances(kernel: ir.Kernel, params: dict[str, int], nest: int | tuple[int, ...] | None = 0):
    """``[(ctx, env, reads, write)]`` in original order; ``reads``: ``[(tensor, element)]``."""
    out = []
    nests = (nest,) if isinstance(nest, int) else nest
    for ctx, env in iterate_statement_instances(kernel, params):
        if nests is not None and ctx.nest not in nests:
            continue
        reads = [(r.tensor, tuple(eval_int(e, env) for e in r.indices)) for r in ir.reads_of(ctx.stmt)]
        t = ctx.stmt.target
        write = (t.tensor, tuple(eval_int(e, env) for e in t.indices))
        out.append((ctx, dict(env), reads, write))
    return out


def time_key(kernel: ir.Kernel, mapping, ctx, env, params: dict[str, int]):
    """The mapped time vector of one instance, straight from ``mapping.md`` (:mod:`mapped_time`)."""
    return TimeKeys(kernel, mapping, params).key(ctx, env)


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
    insts = instances(kernel, params, mapped_nests(mapping))
    tk = TimeKeys(kernel, mapping, params)
    ids = [(c.name, tuple(env[v] for v in c.iterators)) for c, env, _, _ in insts]
    keys = [tk.key(c, env) for c, env, _, _ in insts]
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
