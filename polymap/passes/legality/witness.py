"""Concrete witnesses: statement instances that show why a schedule is illegal.

A violation is found symbolically (a non-empty relation between tagged
instances, ``[S[i] -> S_w0[]] -> [T[j] -> T_r1[]]``, or a triple
``[[W -> w] -> [R -> r]] -> [W2 -> w2]``); users need numbers. Taking them
straight from the relation never fails while it is non-empty:

1. parameters: the given ones if the relation holds there, else the
   smallest ones where it does (least sum, then lexicographically least),
   found by ISL with the parameters turned into set dimensions;
2. instances: the pair closest together, so that the witness teaches. For
   the two instances compared (``near``), ``|a.x - b.x|`` summed over the
   loops they share by name comes first, then the instance values::

       acc(i=0, j=0, k=1) reads t before acc(i=0, j=1, k=0) overwrites it
       (not acc(i=63, j=63, k=0), the last write before the read)

The phrases of the reasons live here too, so they read alike everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from polymap.islcheck import isl
from polymap.poly import KernelModel, cached, fix_params, isl_name
from polymap.evaluate import eval_int


@dataclass(frozen=True)
class Instance:
    """One statement instance: ``acc(i=1, j=0, k=0)``."""

    statement: str
    values: tuple[tuple[str, int], ...]

    def __str__(self) -> str:
        return f"{self.statement}({', '.join(f'{k}={v}' for k, v in self.values)})"

    def to_json(self) -> dict:
        return {self.statement: dict(self.values)}


@dataclass(frozen=True)
class Witness:
    """The JSON witness of ``cli.md``: two instances and the element they share."""

    source: Instance
    sink: Instance
    tensor: str
    element: tuple[int, ...]
    params: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict:
        return {"source": self.source.to_json(), "sink": self.sink.to_json(),
                "element": list(self.element), "params": dict(self.params)}


@dataclass(frozen=True)
class Choice:
    """Concrete instances of one relation, in the order of its (flattened) tuples, with their tags."""

    instances: tuple[Instance, ...]
    tags: tuple[str, ...]  # "" for an untagged relation
    params: tuple[tuple[str, int], ...]


def element_text(tensor: str, element: tuple[int, ...]) -> str:
    """``C[1,0]``; a scalar is just its name."""
    return f"{tensor}[{','.join(map(str, element))}]" if element else tensor


def element_of(model: KernelModel, tag: str, inst: Instance, params: Mapping[str, int]) -> tuple[int, ...]:
    """The element the reference ``tag`` of ``inst`` touches."""
    stmt = model.statement(inst.statement)
    access = next(a for a in stmt.accesses if a.tag == tag)
    env = {**dict(params), **dict(inst.values)}
    return tuple(eval_int(e, env) for e in access.ref.indices)


def tensor_of(model: KernelModel, tag: str) -> str:
    return next(a.tensor for s in model.statements for a in s.accesses if a.tag == tag)


# --------------------------------------------------------------------------- choosing


def leaves(space: isl.Space, *, tagged: bool = True) -> list[tuple[str, str]]:
    """``(statement, tag)`` of each instance of a (nested) wrapped space, left to right."""
    if not space.is_wrapping():
        return [(space.get_tuple_name(isl.dim_type.set), "")]
    u = space.unwrap()
    dom, rng = u.domain(), u.range()
    if tagged and not dom.is_wrapping():  # [S[i] -> tag[]]
        return [(dom.get_tuple_name(isl.dim_type.set), rng.get_tuple_name(isl.dim_type.set))]
    return leaves(dom, tagged=tagged) + leaves(rng, tagged=tagged)


def _coords(point: isl.Point, n: int, start: int = 0) -> list[int]:
    return [int(point.get_coordinate_val(isl.dim_type.set, start + k).to_python()) for k in range(n)]


def _lexmin_coords(s: isl.Set) -> list[int]:
    return _coords(s.lexmin().sample_point(), s.dim(isl.dim_type.set))


def _objective(n: int, pairs: tuple[tuple[int, int], ...]) -> isl.Set:
    """``[s, d.., x0..x(n-1)]`` with ``d_k >= |x_a - x_b|`` for each pair ``(a, b)``, ``s = sum d``."""
    xs = [f"x{m}" for m in range(n)]
    ds = [f"d{m}" for m in range(len(pairs))]
    conds = [f"{d} >= x{a} - x{b} and {d} >= x{b} - x{a}" for d, (a, b) in zip(ds, pairs)]
    conds.append(f"s = {' + '.join(ds) or '0'}")
    return isl.Set(f"{{ [{', '.join(['s'] + ds + xs)}] : {' and '.join(conds)} }}")


def _with_objective(model: KernelModel, flat: isl.Set, pairs: list[tuple[int, int]]) -> isl.Set:
    """``flat`` (dims x) as ``[s, d.., x..]``: at the lexicographic minimum ``d_k = |x_a - x_b|``
    (each ``d`` is only bounded below), so ``s`` is the distance of the pair."""
    n = flat.dim(isl.dim_type.set)
    obj = cached(model, ("witness objective", n, tuple(pairs)), lambda: _objective(n, tuple(pairs)))
    lifted = flat.reset_tuple_id().insert_dims(isl.dim_type.set, 0, 1 + len(pairs))
    return lifted.intersect(obj.align_params(lifted.get_space()))


def _smallest_params(model: KernelModel, ps: isl.Set) -> tuple[int, ...] | None:
    """The parameter values of ``ps`` (a parameter set) with the least sum, then lexicographically least."""
    ps = ps.intersect(model.context.align_params(ps.get_space()))
    if ps.is_empty():
        return None
    names = [isl_name(p) for p in model.params]
    ps = ps.align_params(isl.Set(f"[{', '.join(names)}] -> {{ : }}").get_space())
    n = ps.dim(isl.dim_type.param)
    flat = isl.Set.from_params(ps).move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n)
    flat = flat.insert_dims(isl.dim_type.set, 0, 1)
    ys = [f"y{m}" for m in range(n)]
    total = isl.Set(f"{{ [{', '.join(['s'] + ys)}] : s = {' + '.join(ys) or '0'} }}")
    flat = flat.reset_tuple_id().intersect(total.align_params(flat.get_space()))
    return tuple(_lexmin_coords(flat)[1:1 + len(model.params)])


def _param_values(model: KernelModel, given: Mapping[str, int] | None, maps: Sequence[isl.Set]
                  ) -> tuple[dict[str, int], list[isl.Set]] | None:
    """The given values if some relation holds there, else the smallest values where one does; with
    the relations at those values (fixed once: at real sizes each fixing costs ISL tens of ms)."""
    if given and all(p in given for p in model.params):
        values = {p: int(given[p]) for p in model.params}
        fixed = [fix_params(m, model, values) for m in maps]
        if any(not f.is_empty() for f in fixed):
            return values, fixed
    found = [v for v in (_smallest_params(model, m.params()) for m in maps) if v is not None]
    if not found:
        return None
    values = dict(zip(model.params, min(found, key=lambda v: (sum(v), v))))
    return values, [fix_params(m, model, values) for m in maps]


def choose(model: KernelModel, maps: Sequence[isl.Map], given: Mapping[str, int] | None, *,
           near: tuple[int, int] = (0, 1), tagged: bool = True) -> Choice | None:
    """The closest instances of the (tagged) relations ``maps``, at the given or the smallest parameters.

    ``near`` names the two tuples (in flattened order) whose distance is
    minimised. None only when every map is empty for every parameter value.
    """
    flats = [(leaves(m.wrap().get_space(), tagged=tagged), m.wrap().flatten()) for m in maps if not m.is_empty()]
    found = _param_values(model, given, [f for _, f in flats])
    if found is None:
        return None
    values, fixed_flats = found
    best = None
    for (lv, _), fixed in zip(flats, fixed_flats):
        if fixed.is_empty():
            continue
        names = [model.statement(s).loops for s, _ in lv]
        starts = [sum(len(x) for x in names[:k]) for k in range(len(names))]
        a, b = near
        pairs = [(starts[a] + p, starts[b] + names[b].index(x)) for p, x in enumerate(names[a]) if x in names[b]]
        coords = _lexmin_coords(_with_objective(model, fixed, pairs))
        key = (coords[:1 + len(pairs)], coords[1 + len(pairs):])
        if best is None or key < best[0]:
            best = (key, lv, names, starts, coords[1 + len(pairs):])
    if best is None:
        return None
    _, lv, names, starts, xs = best
    insts = tuple(Instance(s, tuple(zip(n, xs[st:st + len(n)]))) for (s, _), n, st in zip(lv, names, starts))
    return Choice(insts, tuple(t for _, t in lv), tuple(sorted(values.items())))


# --------------------------------------------------------------------------- phrasing


def raw_read_first(w: Instance, r: Instance, el: str) -> str:
    return f"{w} writes {el}, which {r} reads; the new order runs the read first"


def war_write_first(r: Instance, w2: Instance, el: str) -> str:
    return (f"{r} reads {el} before {w2} overwrites it; "
            f"the new order runs the write first, so the read sees the wrong value")


def waw_in_between(w: Instance, r: Instance, w2: Instance, el: str) -> str:
    return f"{w} writes {el}, which {r} reads; the new order lets {w2} overwrite {el} in between"


def waw_final(x: Instance, y: Instance, el: str) -> str:
    return f"the new order makes {x} the last write to {el} instead of {y}"


def spatial_race(a: Instance, b: Instance, el: str, kind: str, loop: str, level: str) -> str:
    verb = {"RAW": "writes {el}, which {b} reads", "WAR": "reads {el}, which {b} overwrites",
            "WAW": "writes {el}, which {b} overwrites"}[kind].format(el=el, b=b)
    return (f"{a} {verb}, but spatial loop {loop} at level {level} runs them at the same time "
            f"on different instances")
