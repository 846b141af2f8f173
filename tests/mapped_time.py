"""The mapped time of a statement instance, straight from ``mapping.md``, in plain Python (no ISL).

Used by :mod:`simulator` and :mod:`bruteforce`. Covers every mapping: one
nest or fused ones (``nests``), ``schedule`` entries (evaluated as Python
expressions over the instance's iterators and the parameters: ``floor``,
``%``, ``min``, ``max`` mean what they mean in ``.loop`` code) and
``wavefront`` (the diagonal ``a + b`` where ``a`` stands, then ``b``).

Per level, per loop of its order: a phase when some statement lacks the loop
(0 before, 1 has it, 2 after), then the tile coordinate; last, the textual rank.
"""
from __future__ import annotations

import math

from polymap import ir


def mapped_nests(mapping) -> tuple[int, ...]:
    return tuple(getattr(mapping, "nests", ()) or (mapping.nest,))


def contexts(kernel: ir.Kernel, mapping) -> list[ir.StatementContext]:
    nests = set(mapped_nests(mapping))
    return [c for c in kernel.statements() if c.nest in nests]


def _entry(mapping, name: str):
    return next((e for e in getattr(mapping, "schedule", ()) if e.statement == name), None)


def coordinates(mapping, ctx: ir.StatementContext, env: dict, params: dict) -> dict[str, int]:
    """``{loop: value}`` of one instance: its schedule entry evaluated, or its iterators."""
    e = _entry(mapping, ctx.name)
    if e is None:
        return {x: env[x] for x in ctx.iterators}
    scope = {**params, **{x: env[x] for x in ctx.iterators}}
    funcs = {"floor": math.floor, "min": min, "max": max, "__builtins__": {}}
    return {x: int(eval(text, funcs, scope)) for x, text in zip(e.loops, e.exprs)}


def statement_loops(mapping, ctx: ir.StatementContext) -> tuple[str, ...]:
    e = _entry(mapping, ctx.name)
    return ctx.iterators if e is None else e.loops


def _loop_phase(kernel: ir.Kernel, ctx: ir.StatementContext, loop: str, nest: int) -> int:
    """The phase rule over the loops of the text (one nest, no schedule)."""
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


class TimeKeys:
    """Mapped time vectors of the instances of one mapping."""

    def __init__(self, kernel: ir.Kernel, mapping, params: dict):
        self.kernel, self.mapping, self.params = kernel, mapping, dict(params)
        self.ctxs = contexts(kernel, mapping)
        self.rank = {c.name: k for k, c in enumerate(self.ctxs)}
        self.loops_of = {c.name: statement_loops(mapping, c) for c in self.ctxs}
        self.partial = {x for x in mapping.loops if any(x not in self.loops_of[c.name] for c in self.ctxs)}
        self.plain = not getattr(mapping, "schedule", ()) and len(mapped_nests(mapping)) == 1
        n = len(mapping.levels)
        self.tiles = {x: [mapping.levels[m].tile[k] for m in range(n)] + [1] for k, x in enumerate(mapping.loops)}

    def phase(self, ctx: ir.StatementContext, loop: str) -> int:
        if loop in self.loops_of[ctx.name]:
            return 1
        if self.plain:
            return _loop_phase(self.kernel, ctx, loop, self.mapping.nest)
        having = [c.position for c in self.ctxs if loop in self.loops_of[c.name]]
        return 0 if having and all(ctx.position < p for p in having) else 2

    def coord(self, x: str, value: int, level: int) -> int:
        tiles = self.tiles[x]
        r = value
        for m in range(level):  # residue inside the level-l tile
            if tiles[m + 1] is not None:
                r %= tiles[m + 1]
        size = tiles[level + 1]
        return 0 if size is None else r // size

    def dims(self) -> list[tuple[int, str, str, bool]]:
        """``(level, loop, kind, spatial)`` per dimension (the textual rank excluded)."""
        out = []
        for l, lv in enumerate(self.mapping.levels):
            for x in lv.order:
                if x in self.partial:
                    out.append((l, x, "phase", False))
                out.append((l, x, "coord", x in lv.spatial))
        return out

    def key(self, ctx: ir.StatementContext, env: dict) -> tuple:
        vals = coordinates(self.mapping, ctx, env, self.params)
        key = []
        for l, x, kind, _ in self.dims():
            if kind == "phase":
                key.append(self.phase(ctx, x))
            elif x not in vals:
                key.append(0)
            else:
                wave = tuple(getattr(self.mapping.levels[l], "wavefront", ()))
                c = self.coord(x, vals[x], l)
                if wave and x == wave[0]:
                    c += self.coord(wave[1], vals[wave[1]], l)
                key.append(c)
        key.append(self.rank[ctx.name])
        return tuple(key)
