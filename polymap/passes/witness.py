"""Concrete witnesses: one pair of statement instances per violated dependence.

A violation is found symbolically (a non-empty relation between tagged
instances, ``[S[i] -> S_w0[]] -> [T[j] -> T_r1[]]``); users need numbers.
This module fixes the parameters (the values given on the command line,
else small ones), takes the lexicographically smallest pair, recovers the
shared element from the reference's subscripts, and phrases it::

    init(i=1, j=0) writes C[1,0], which acc(i=1, j=0, k=0) reads;
    the new order runs the read first
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from ..islcheck import isl
from ..poly import KernelModel, fix_params
from .dependences import maps_of
from .evaluate import eval_int


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
class TaggedPair:
    """A concrete pair of tagged instances (each with the reference it uses)."""

    source: Instance
    source_tag: str
    sink: Instance
    sink_tag: str
    params: tuple[tuple[str, int], ...]


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


def element_text(tensor: str, element: tuple[int, ...]) -> str:
    """``C[1,0]``; a scalar is just its name."""
    return f"{tensor}[{','.join(map(str, element))}]" if element else tensor


def param_candidates(model: KernelModel, given: Mapping[str, int] | None) -> list[dict[str, int]]:
    """Parameter values to look for a witness at: the given ones, then small uniform ones."""
    out = [dict(given)] if given else []
    out += [{p: v for p in model.params} for v in (2, 3, 4, 5, 6, 8, 1)]
    return out


def _point_values(point: isl.Point, space_names: list[str], start: int) -> tuple[tuple[str, int], ...]:
    return tuple((n, int(point.get_coordinate_val(isl.dim_type.set, start + k).to_python()))
                 for k, n in enumerate(space_names))


def _names(model: KernelModel, statement: str) -> list[str]:
    return list(model.statement(statement).loops)


def _tags(m: isl.Map) -> tuple[str, str, str, str]:
    sp = m.get_space()
    d, r = sp.domain().unwrap(), sp.range().unwrap()
    return (d.get_tuple_name(isl.dim_type.in_), d.get_tuple_name(isl.dim_type.out),
            r.get_tuple_name(isl.dim_type.in_), r.get_tuple_name(isl.dim_type.out))


def pick_pair(model: KernelModel, tagged: isl.UnionMap | Iterable[isl.Map],
              given: Mapping[str, int] | None) -> TaggedPair | None:
    """The lexicographically first pair of a tagged relation, at the first parameters where it exists."""
    maps = maps_of(tagged) if isinstance(tagged, isl.UnionMap) else list(tagged)
    maps = sorted((m for m in maps if not m.is_empty()), key=lambda m: _tags(m))
    for values in param_candidates(model, given):
        for m in maps:
            fixed = fix_params(m.domain_factor_domain().range_factor_domain(), model, values)
            if fixed.is_empty():
                continue
            point = fixed.wrap().lexmin().sample_point()
            s, stag, t, ttag = _tags(m)
            a_names, b_names = _names(model, s), _names(model, t)
            a = Instance(s, _point_values(point, a_names, 0))
            b = Instance(t, _point_values(point, b_names, len(a_names)))
            return TaggedPair(a, stag, b, ttag, tuple(sorted(values.items())))
    return None


def element_of(model: KernelModel, tag: str, inst: Instance, params: Mapping[str, int]) -> tuple[int, ...]:
    """The element the reference ``tag`` of ``inst`` touches."""
    stmt = model.statement(inst.statement)
    access = next(a for a in stmt.accesses if a.tag == tag)
    env = {**dict(params), **dict(inst.values)}
    return tuple(eval_int(e, env) for e in access.ref.indices)


def tensor_of(model: KernelModel, tag: str) -> str:
    return next(a.tensor for s in model.statements for a in s.accesses if a.tag == tag)


def image_of(model: KernelModel, rel: isl.UnionMap, inst: Instance, tag: str,
             params: Mapping[str, int]) -> tuple[Instance, str] | None:
    """The single instance ``rel`` maps tagged instance ``(inst, tag)`` to, if any."""
    for m in maps_of(rel):
        s, stag, t, ttag = _tags(m)
        if s != inst.statement or stag != tag:
            continue
        plain = fix_params(m.domain_factor_domain().range_factor_domain(), model, params)
        cond = " and ".join(f"{k} = {v}" for k, v in inst.values) or "true"
        dom = isl.Set(f"{{ {s}[{', '.join(k for k, _ in inst.values)}] : {cond} }}")
        img = plain.intersect_domain(dom.align_params(plain.get_space().domain())).range()
        if img.is_empty():
            continue
        point = img.lexmin().sample_point()
        return Instance(t, _point_values(point, _names(model, t), 0)), ttag
    return None


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


def pick_plain(model: KernelModel, rel: isl.Map, given: Mapping[str, int] | None
               ) -> tuple[Instance, Instance, dict[str, int]] | None:
    """The lexicographically first pair of an untagged relation ``S[..] -> T[..]``."""
    s = rel.get_tuple_name(isl.dim_type.in_)
    t = rel.get_tuple_name(isl.dim_type.out)
    for values in param_candidates(model, given):
        fixed = fix_params(rel, model, values)
        if fixed.is_empty():
            continue
        point = fixed.wrap().lexmin().sample_point()
        a_names = _names(model, s)
        a = Instance(s, _point_values(point, a_names, 0))
        b = Instance(t, _point_values(point, _names(model, t), len(a_names)))
        return a, b, values
    return None
