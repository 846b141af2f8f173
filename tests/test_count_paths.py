"""``count_mapping`` takes the fast exact path inside its class and the ISL path outside, with equal results.

Nests are generated (box loops, random subscripts ``a*x + c`` and ``a*u + w``,
an optional initialisation lacking the innermost loop, scalars), so the class
boundary of :func:`polymap.passes.counting.fastcount_nest.analyse_nest` is
crossed both ways; every answer of the entry is compared with the ISL path
alone and, on small cases, with the brute-force simulator.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from polymap.driver import parse
from polymap.errors import MappingError
from polymap.machine.arch import architecture_from_dict
from polymap.mapping.files import mapping_from_dict
from polymap.mapping.model import Mapping
from polymap.passes.counting import counting, fit
from polymap.passes.counting.counting import count_mapping, isl_count_mapping
from polymap.passes.counting.fastcount import fast_counts, fast_footprints
from polymap.passes.counting.fastcount_nest import NotSupported, analyse_nest
from polymap.poly import build_model
from simulator import counts_as_dict, simulate
from test_fastcount import KERNELS

LOOPS = ("i", "j", "k")


def arch_of(n: int, fanout: int = 4):
    levels = [{"name": "L0"}] + [{"name": f"L{k}", "instances": fanout ** (k - 1)} for k in range(1, n)]
    return architecture_from_dict({"levels": levels, "compute": {"instances": fanout ** (n - 1)}},
                                  source_name="<test>")


@st.composite
def subscripts(draw, loops: tuple[str, ...], must: str | None):
    """Subscripts over distinct loops of ``loops`` (``must`` among them when given): ``x``, ``a*x + c``
    or ``a*u + w``; with their extents in the extents' names ``E_x``."""
    chosen = draw(st.lists(st.sampled_from(loops), unique=True, max_size=len(loops)))
    if must is not None and must not in chosen:
        chosen.append(must)
    subs = []
    rest = list(chosen)
    while rest:
        x = rest.pop(0)
        if rest and draw(st.integers(0, 3)) == 0:  # a two-loop subscript a*u + w
            w = rest.pop(0)
            a = draw(st.integers(1, 2))
            subs.append((f"{a} * {x} + {w}", f"{a} * E_{x} + E_{w}"))
            continue
        a, c = draw(st.integers(1, 2)), draw(st.integers(0, 1))
        subs.append((f"{a} * {x} + {c}", f"{a} * E_{x} + {c + 1}"))
    return draw(st.permutations(subs))


@st.composite
def nests(draw):
    """A kernel of one nest ``i, j[, k]``: a body ``W[..] += R0[..] (* R1[..]) (* s)`` with an optional
    initialisation before the innermost loop: ``W[..] = 0``, ``W[..] *= b`` or ``W[..] = b[..]``
    (``b`` accessed by the initialisation alone, like 2mm's ``beta``; ``s`` by the body alone)."""
    loops = LOOPS[:draw(st.integers(2, 3))]
    inner = loops[-1]
    init = draw(st.sampled_from([None, "zero", "scale", "copy"]))
    extents = {x: draw(st.integers(1, 5)) for x in loops}
    # with an initialisation, W lacks the innermost loop (the initialisation has no such loop)
    w_subs = draw(subscripts(loops[:-1] if init else loops, None))
    reads = [draw(subscripts(loops, inner if init and draw(st.integers(0, 4)) else None))
             for _ in range(draw(st.integers(1, 2)))]
    scalar = draw(st.booleans())
    b_subs = draw(subscripts(loops[:-1], None)) if init == "copy" else ()
    decls, names = [], []
    for t, subs in [("W", w_subs)] + [(f"R{k}", s) for k, s in enumerate(reads)] + \
            ([("b", b_subs)] if init in ("scale", "copy") else []):
        dims = ", ".join(d for _, d in subs)
        kind = ("out" if init in ("zero", "copy") else "inout") if t == "W" else "in"
        decls.append(f"  {kind} {t}{f'[{dims}]' if subs else ''}")
        names.append(f"{t}{'[' + ', '.join(e for e, _ in subs) + ']' if subs else ''}")
    if scalar:
        decls.append("  in s : f64")
    rhs = " * ".join(names[1:1 + len(reads)] + (["s"] if scalar else []))
    body = f"acc: {names[0]} += {rhs}"
    first = {"zero": f"{names[0]} = 0", "scale": f"{names[0]} *= b",
             "copy": f"{names[0]} = {names[-1]}"}.get(init)
    params = ", ".join(f"E_{x} = {e}" for x, e in extents.items())
    head = ", ".join(f"{x} in 0..E_{x}" for x in loops[:-1])
    if init:
        text = f"for {head} {{\n    init: {first}\n    for {inner} in 0..E_{inner} {{ {body} }}\n  }}"
    else:
        text = f"for {head}, {inner} in 0..E_{inner} {{ {body} }}"
    src = "kernel g(" + params + ") {\n" + "\n".join(decls) + "\n  " + text + "\n}\n"
    return src, loops


@st.composite
def cases(draw):
    src, loops = draw(nests())
    kernel = parse(src, "<generated>").kernels[0]
    tensors = [d.name for d in kernel.decls]
    n = draw(st.integers(2, 3))
    levels = []
    outer = {x: 4 for x in loops}  # tiles do not grow inward
    for l in range(n):
        lv = {"level": f"L{l}", "order": list(draw(st.permutations(loops)))}
        if l > 0:
            lv["tile"] = {x: draw(st.integers(1, outer[x])) for x in loops if draw(st.booleans())}
            outer.update(lv["tile"])
            lv["keep"] = [t for t in tensors if draw(st.integers(0, 3)) > 0]
        if draw(st.integers(0, 3)) == 0:
            lv["spatial"] = [draw(st.sampled_from(loops))]
        levels.append(lv)
    return src, n, levels


def build(src: str, n: int, levels: list[dict]):
    kernel = parse(src, "<generated>").kernels[0]
    arch = arch_of(n)
    try:
        mapping = mapping_from_dict({"levels": levels}, kernel=kernel, arch=arch)
    except (ValueError, MappingError):  # an invalid draw (a spatial loop wider than the fan-out): not a case
        return None
    return kernel, build_model(kernel), arch, mapping


def in_class(model, kernel, params) -> bool:
    try:
        analyse_nest(model, 0, params)
    except NotSupported:
        return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_count_mapping_equals_the_isl_path(case):
    """The entry's answer (fast where it applies) is the ISL path's on every generated nest and mapping."""
    built = build(*case)
    if built is None:
        return
    kernel, model, arch, mapping = built
    params = {p.name: p.default for p in kernel.params}
    entry = count_mapping(model, mapping, arch, params=params)
    assert entry == isl_count_mapping(model, mapping, arch, params=params)
    fast = fast_counts(model, mapping, arch, params=params)
    if not in_class(model, kernel, params):
        assert fast is None
    event(f"in the class: {in_class(model, kernel, params)}, fast path: {fast is not None}")
    if fast is not None:
        assert entry == fast  # the entry took the fast path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_fast_footprints_are_the_isl_paths_also_where_its_counts_are_not_exact(case):
    """Inside the class every level's footprint from the fast path equals the ISL path's (barvinok over
    every residency), including mappings whose other fast counts are inexact (a spatial loop's edge
    tile): count_mapping takes these footprints there and counts the rest with ISL."""
    built = build(*case)
    if built is None:
        return
    kernel, model, arch, mapping = built
    params = {p.name: p.default for p in kernel.params}
    fps = fast_footprints(model, mapping, params=params)
    if fps is None:  # outside the class (the nest, or this mapping's multicasts): ISL counts them
        return
    exact = fast_counts(model, mapping, arch, params=params) is not None
    event(f"fast counts exact: {exact}")
    isl = isl_count_mapping(model, mapping, arch, params=params)
    assert fps == tuple(None if lv.footprint is None else (lv.footprint, lv.footprint_bytes) for lv in isl.levels)


def test_an_edge_tiles_idle_instance_leaves_the_footprints_to_the_fast_path():
    """gemm at 400 x 480 x 300 on host, the LLC's 256-row tiles spread over its two instances (the second
    row tile has 144 rows: the fast counts are inexact), tiles dividing nothing: the fast footprints are
    the ISL path's, and count_mapping (ISL counts, fast footprints) answers what the ISL path alone does."""
    from pathlib import Path

    from polymap.driver import load_program
    from polymap.machine.presets import load_architecture
    from polymap.mapping.model import LevelMapping

    kernel = load_program(Path(__file__).resolve().parent.parent / "examples" / "gemm.loop").kernels[0]
    arch, model = load_architecture("host"), build_model(kernel)
    keep = ("A", "B", "C")
    tiles = [(None, None, None), (256, 256, 256), (128, 256, 128), (16, 16, 64), (8, 16, 1)]
    levels = tuple(LevelMapping(lv.name, t, ("i", "k", "j"), ("i",) if lv.name == "LLC" else (), keep)
                   for lv, t in zip(arch.levels, tiles))
    mapping = Mapping("gemm", 0, ("i", "j", "k"), levels)
    params = {"M": 400, "N": 480, "K": 300}
    assert fast_counts(model, mapping, arch, params=params) is None
    isl = isl_count_mapping(model, mapping, arch, params=params)
    assert fast_footprints(model, mapping, params=params) == tuple(
        None if lv.footprint is None else (lv.footprint, lv.footprint_bytes) for lv in isl.levels)
    assert count_mapping(model, mapping, arch, params=params) == isl


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_count_mapping_equals_the_simulator(case):
    built = build(*case)
    if built is None:
        return
    kernel, model, arch, mapping = built
    params = {p.name: p.default for p in kernel.params}
    assert counts_as_dict(count_mapping(model, mapping, arch, params=params)) == simulate(kernel, mapping, params)


GEMM_INIT = KERNELS["gemm_init"][0]  # gemm with its initialisation: the fast path's own test kernel

TRIANGULAR = "kernel t(N = 5) { in L[N, N]; inout y[N]; for i in 0..N, j in 0..i + 1 { y[i] += L[i, j] } }"


def _mapping(kernel, arch, levels):
    return mapping_from_dict({"levels": levels}, kernel=kernel, arch=arch)


def _refuse_isl(*args: object, **kwargs: object) -> None:
    raise AssertionError("the ISL path was taken")


def test_in_class_takes_the_fast_path(monkeypatch):
    """gemm with its initialisation is counted without ISL (the ISL path made to fail would show)."""
    kernel = parse(GEMM_INIT, "<test>").kernels[0]
    model, arch = build_model(kernel), arch_of(2)
    m = _mapping(kernel, arch, [{"level": "L0", "order": ["i", "j", "k"]},
                                {"level": "L1", "tile": {"i": 2, "j": 2, "k": 3}, "order": ["k", "i", "j"]}])
    expected = isl_count_mapping(model, m, arch)
    monkeypatch.setattr(counting, "isl_count_mapping", _refuse_isl)
    assert count_mapping(model, m, arch) == expected
    assert counts_as_dict(expected) == simulate(kernel, m, {"M": 5, "N": 3, "K": 4})


@pytest.mark.parametrize("what", ["triangular", "symbolic", "loops reordered"])
def test_outside_the_class_takes_the_isl_path(monkeypatch, what):
    """Outside the class (triangular bounds), for formulas, and for a mapping naming the loops in another
    order than the nest's, the ISL path answers."""
    src = TRIANGULAR if what == "triangular" else GEMM_INIT
    kernel = parse(src, "<test>").kernels[0]
    model, arch = build_model(kernel), arch_of(2)
    loops = ["i", "j"] if what == "triangular" else ["i", "j", "k"]
    m = _mapping(kernel, arch, [{"level": "L0", "order": loops},
                                {"level": "L1", "tile": {"i": 2}, "order": loops[::-1]}])
    if what == "loops reordered":
        m = Mapping(m.kernel, m.nest, ("k", "i", "j"),
                    tuple(lm.__class__(lm.level, (lm.tile[2], lm.tile[0], lm.tile[1]), lm.order, lm.spatial, lm.keep)
                          for lm in m.levels))
    params = {p.name: p.default for p in kernel.params}
    expected = simulate(kernel, m, params)
    assert counts_as_dict(count_mapping(model, m, arch, symbolic=what == "symbolic")) == expected
    monkeypatch.setattr(counting, "isl_count_mapping", _refuse_isl)
    with pytest.raises(AssertionError, match="ISL path"):
        count_mapping(model, m, arch, symbolic=what == "symbolic")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.integers(1, 40), st.integers(8, 200))
def test_capacity_problems_equal_on_both_paths(case, elements, nbytes):
    """``capacity_problems`` reads the fast path's footprints where it applies: the same problems as
    from the ISL footprints (capacities in elements at L1, in bytes below)."""
    src, n, levels = case
    kernel = parse(src, "<generated>").kernels[0]
    spec = [{"name": "L0"}] + [{"name": f"L{k}", "instances": 4 ** (k - 1),
                                "capacity": elements if k == 1 else f"{nbytes}B"} for k in range(1, n)]
    arch = architecture_from_dict({"levels": spec, "compute": {"instances": 4 ** (n - 1)}}, source_name="<test>")
    try:
        mapping = mapping_from_dict({"levels": levels}, kernel=kernel, arch=arch)
    except (ValueError, MappingError):
        return
    model = build_model(kernel)
    params = {p.name: p.default for p in kernel.params}
    both = fit.capacity_problems(model, mapping, arch, params)
    original = fit.fast_path
    fit.fast_path = lambda *a, **k: (None, None)  # the ISL footprints only
    try:
        assert fit.capacity_problems(model, mapping, arch, params) == both
    finally:
        fit.fast_path = original
