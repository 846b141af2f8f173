"""The Python API: every ``polymap`` command as one function.

Research pipelines import these instead of shelling out::

    import polymap

    kernel = polymap.load("examples/gemm.loop").kernels[0]
    deps = polymap.dependences(kernel)                  # exact, value-based
    deps.loops["k"].reduction                           # True
    polymap.check(kernel, order=("k", "i", "j")).legal  # True, with a note
    mapping = polymap.search(kernel, arch="toy", params={"M": 64, "N": 64, "K": 64})[0]
    report = polymap.cost(kernel, mapping, arch="toy", params={"M": 64, "N": 64, "K": 64})
    print(polymap.transform(kernel, mapping))           # the tiled nest as .loop text
    result = polymap.compile(kernel, arch="toy", mapping=mapping, out_dir="out")

Arguments are forgiving in the usual ways: ``arch`` is an
:class:`~polymap.machine.arch.Architecture`, a preset name or a YAML path;
``mapping`` a :class:`~polymap.mapping.model.Mapping`, a dict in the
``mapping.md`` format or a YAML path; ``params`` maps parameter names to
values (defaults fill the rest). Errors are the ones of :mod:`polymap.errors`:
``PolymapError`` for bad input, ``Refusal`` subclasses for a "no".
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping as MappingT, Sequence

import numpy as np

from polymap import ir
from polymap.driver import load_program, param_values, parse
from polymap.errors import IllegalTransformation, InvalidMapping
from polymap.poly import KernelModel, build_model

__all__ = ["parse", "load", "model", "dependences", "check", "cost", "search", "transform",
           "compile", "run", "architecture", "mapping_of", "report", "search_network",
           "import_timeloop", "export_timeloop"]


def load(path: str | Path, *, cpp: str = "") -> ir.Program:
    """Read, parse and check a ``.loop`` file, or a C file's scops (raises ``PolymapError`` with located diagnostics).

    ``cpp`` holds extra preprocessor flags for a C file (``"-I DIR -DN=64"``).
    """
    return load_program(path, cpp=cpp)


def model(kernel: ir.Kernel) -> KernelModel:
    """The polyhedral model: domains, accesses and original schedule as ISL objects."""
    return build_model(kernel)


def architecture(arch: Any = "host"):
    """An :class:`~polymap.machine.arch.Architecture` from a preset name, a YAML path or itself."""
    from polymap.machine.arch import Architecture
    from polymap.machine.presets import load_architecture

    return arch if isinstance(arch, Architecture) else load_architecture(str(arch))


def mapping_of(kernel: ir.Kernel, mapping: Any, arch: Any = "host"):
    """A validated :class:`~polymap.mapping.model.Mapping` from a Mapping, a ``mapping.md`` dict or a YAML path."""
    from polymap.mapping.files import load_mapping, mapping_from_dict
    from polymap.mapping.model import Mapping

    if isinstance(mapping, Mapping):
        return mapping
    if isinstance(mapping, dict):
        return mapping_from_dict(mapping, kernel=kernel, arch=architecture(arch))
    return load_mapping(mapping, kernel=kernel, arch=architecture(arch))


# --------------------------------------------------------------------------- dependences


@dataclass(frozen=True)
class DependenceReport:
    """What ``polymap deps`` prints: the dependences and the class of every loop."""

    kernel: str
    analysis: str  # "value-based" | "memory-based"
    dependences: tuple  # of polymap.passes.dependences.dependences.Dependence
    loops: dict  # loop name -> polymap.passes.dependences.loop_classes.LoopClass


def dependences(kernel: ir.Kernel, *, memory_based: bool = False) -> DependenceReport:
    """Exact dependences (value-based by default) and which loops are parallel or reductions."""
    from polymap.passes.dependences.dependences import dependences as find
    from polymap.passes.dependences.loop_classes import loop_classes

    m = build_model(kernel)
    deps = find(m, memory=memory_based)
    return DependenceReport(kernel.name, "memory-based" if memory_based else "value-based",
                            tuple(deps), loop_classes(m))


# --------------------------------------------------------------------------- legality


def check(kernel: ir.Kernel, *, order: Sequence[str] | None = None, mapping: Any = None,
          arch: Any = None, params: MappingT[str, int] | None = None):
    """Is a loop ``order`` (outer -> inner) or a whole ``mapping`` legal?

    Returns a :class:`~polymap.passes.legality.legality.Verdict` (``legal``,
    ``violations`` with witnesses, ``notes``, ``hints``); it never raises
    for an illegal answer. With ``arch``, fan-out and capacity are checked too.
    """
    from polymap.mapping.model import nest_loops
    from polymap.passes.legality.legality import check_mapping
    from polymap.passes.schedule.tiling import order_mapping

    if (order is None) == (mapping is None):
        raise TypeError("check() needs exactly one of order= or mapping=")
    m = build_model(kernel)
    values = param_values(kernel, dict(params or {}))
    if order is not None:
        order = tuple(order)
        nest = next((n for n in range(len(kernel.nests())) if set(order) <= set(nest_loops(kernel, n))), 0)
        return check_mapping(m, order_mapping(kernel, nest, nest_loops(kernel, nest), order), params=values)
    arch_obj = architecture(arch) if arch is not None else None
    mp = mapping_of(kernel, mapping, arch_obj or "host")
    return check_mapping(m, mp, arch=arch_obj, params=values)


# --------------------------------------------------------------------------- counting


def cost(kernel: ir.Kernel, mapping: Any, *, arch: Any, params: MappingT[str, int] | None = None,
         symbolic: bool = False, convention: str = "exact"):
    """Exact traffic, energy, cycles and intensity of a mapping (``mapping.md``).

    ``convention="timeloop"`` counts as Timeloop does (outputs start at zero,
    ``spatial_reduction`` levels receive combined partial sums).
    Returns a :class:`~polymap.passes.counting.cost_model.CostReport`; raises
    :class:`~polymap.errors.InvalidMapping` when the mapping does not fit.
    """
    from polymap.mapping.model import check_fanout, loop_extents, mapping_loop_extents
    from polymap.passes.counting.cost_model import active_compute_units, evaluate
    from polymap.passes.counting.counting import capacity_violations, count_mapping

    arch_obj = architecture(arch)
    mp = mapping_of(kernel, mapping, arch_obj)
    values = param_values(kernel, dict(params or {}))
    m = build_model(kernel)
    extents = mapping_loop_extents(kernel, mp, values)
    problems = check_fanout(mp, arch_obj, extents)
    over = capacity_violations(m, mp, arch_obj, values)
    problems += [f"level {v['level']}: the footprint is {v['footprint']} {v['unit']}, over its capacity "
                 f"of {v['capacity']} {v['unit']}" for v in over]
    if problems:
        raise InvalidMapping("the mapping does not fit: " + "; ".join(problems),
                             {"kernel": kernel.name, "valid": False, "problems": problems, "capacity": over})
    if convention == "timeloop":  # mapping.md, "Conventions for comparing with other tools"
        from polymap.errors import InputError
        from polymap.passes.counting.convention import count_mapping_timeloop

        if symbolic:
            raise InputError("convention 'timeloop' counts numbers only (no symbolic formulas)")
        counts = count_mapping_timeloop(m, mp, arch_obj, params=values)
    elif convention == "exact":
        counts = count_mapping(m, mp, arch_obj, params=values, symbolic=symbolic)
    else:
        raise TypeError(f"cost(): convention must be 'exact' or 'timeloop', not {convention!r}")
    return evaluate(counts, arch_obj, active_units=active_compute_units(mp, arch_obj, extents))


def search(kernel: ir.Kernel, *, arch: Any = "host", params: MappingT[str, int] | None = None,
           nest: int = 0, top: int = 10) -> list:
    """The best legal, fitting mappings of one nest, best first (ranked by energy, then cycles)."""
    from polymap.passes.search.search import search_mappings

    values = param_values(kernel, dict(params or {}))
    found = search_mappings(build_model(kernel), nest, architecture(arch), values, top=top)
    return [mp for mp, _ in found]


def search_network(kernels: Sequence[ir.Kernel], *, arch: Any = "host", params: MappingT[str, int] | None = None,
                   options: Any = None, workers: int | None = None, scheduler: str | None = None,
                   progress: Any = None):
    """``polymap search``: every nest of every kernel searched over its pruned mapspace, best first.

    ``options`` is a :class:`~polymap.passes.search.mapsearch.SearchOptions`
    (objective, top, evaluation budget); the work runs on ``workers`` local
    processes (None: the cores) or on the Dask scheduler at ``scheduler``
    (``tcp://HOST:PORT``), with the same answer. Returns a
    :class:`~polymap.passes.search.network.NetworkResult` (per layer: the
    best mappings with their ISL-confirmed costs, the space and what was
    pruned, lower bounds per level; totals).
    """
    from polymap.passes.search.executors import DaskExecutor, LocalExecutor, default_workers
    from polymap.passes.search.mapsearch import SearchOptions
    from polymap.passes.search.network import search_kernels

    executor = DaskExecutor(scheduler) if scheduler else LocalExecutor(workers or default_workers())
    return search_kernels(tuple(kernels), architecture(arch), dict(params or {}),
                          options=options or SearchOptions(), executor=executor, progress=progress)


# --------------------------------------------------------------------------- code


def _legal_or_refuse(kernel: ir.Kernel, m: KernelModel, mappings: tuple, values) -> None:
    from polymap.passes.legality.legality import schedule_violations
    from polymap.passes.schedule.tiling import mapped_schedule

    for mp in mappings:
        bad = schedule_violations(m, mapped_schedule(m, mp), params=values)
        if bad:
            raise IllegalTransformation(
                f"kernel {kernel.name}: the mapping is illegal:\n" + "\n".join(f"  {v.reason}" for v in bad),
                {"kernel": kernel.name, "legal": False, "violations": [v.to_json() for v in bad]})


def transform(kernel: ir.Kernel, mapping: Any, *, arch: Any = "host",
              params: MappingT[str, int] | None = None) -> str:
    """The mapped nest as ``.loop`` source that parses again and computes the same results.

    Refuses an illegal mapping (:class:`~polymap.errors.IllegalTransformation`).
    """
    from polymap.codegen.loop_emitter import emit_loop

    m = build_model(kernel)
    mp = mapping_of(kernel, mapping, arch)
    _legal_or_refuse(kernel, m, (mp,), param_values(kernel, dict(params or {})))
    return emit_loop(kernel, m, mp)


@dataclass(frozen=True)
class CompiledKernel:
    """What ``compile`` produced for one kernel."""

    kernel: str
    mappings: tuple
    c_source: str
    numpy_source: str
    files: tuple[str, ...]
    verification: Any  # polymap.codegen.verify.VerifyResult, or None with verify=False


def compile(kernel: ir.Kernel, *, arch: Any = "host", mapping: Any = None,  # noqa: A001 - the command's name
            params: MappingT[str, int] | None = None, out_dir: str | Path | None = None,
            targets: Sequence[str] = ("c", "numpy"), verify: bool = True) -> CompiledKernel:
    """Tiled C and NumPy code for ``kernel``, verified against the reference execution.

    Without ``mapping`` every nest gets the mapping ``polymap compile``
    would choose. With ``out_dir`` the files ``NAME.c`` and ``NAME.py`` are
    written there. Raises ``IllegalTransformation`` for an illegal mapping and
    ``VerificationFailure`` when the generated code disagrees with the reference.
    """
    from polymap.codegen.c.emitter import emit_c
    from polymap.codegen.numpy.emitter import emit_numpy
    from polymap.codegen.runner import numpy_mapping_arg, resolve_mappings
    from polymap.passes.search.numpy_choice import numpy_mappings

    arch_obj = architecture(arch)
    values = param_values(kernel, dict(params or {}))
    m = build_model(kernel)
    if mapping is not None:
        mappings = (mapping_of(kernel, mapping, arch_obj),)
        _legal_or_refuse(kernel, m, mappings, values)
    else:
        mappings = tuple(resolve_mappings(kernel, m, values, arch=arch_obj))
    c_source = emit_c(kernel, m, mappings, arch=arch_obj)
    # without a given mapping the NumPy target gets its own choice (whole-array blocks)
    numpy_maps = mappings if mapping is not None else numpy_mappings(m, arch_obj, values)
    numpy_source = emit_numpy(kernel, m, numpy_mapping_arg(numpy_maps))
    files: list[str] = []
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for suffix, text in ((".c", c_source), (".py", numpy_source)):
            (out / f"{kernel.name}{suffix}").write_text(text)
            files.append(str(out / f"{kernel.name}{suffix}"))
    result = None
    if verify:
        from polymap.codegen.verify import verify as check_against_reference

        result = check_against_reference(kernel, values, targets=tuple(targets), mapping=mappings, model=m,
                                         target_mappings={"numpy": numpy_maps})
    return CompiledKernel(kernel.name, mappings, c_source, numpy_source, tuple(files), result)


def run(kernel: ir.Kernel, arrays: MappingT[str, np.ndarray], *, params: MappingT[str, int] | None = None,
        target: str = "reference", mapping: Any = None, arch: Any = "host") -> dict[str, np.ndarray]:
    """Run ``kernel`` on ``arrays`` (every ``in``/``inout`` tensor); return every ``out``/``inout`` tensor.

    ``target`` is ``"reference"`` (the original program, straight from the
    IR), ``"c"`` or ``"numpy"`` (generated code for ``mapping``, or for the
    mapping ``compile`` would choose).
    """
    from polymap.tensors import validate_inputs

    values = param_values(kernel, dict(params or {}))
    validate_inputs(kernel, arrays, values, allow_extra=True)
    if target == "reference":
        from polymap.reference import execute

        return execute(kernel, dict(arrays), values)
    from polymap.codegen.runner import run_generated

    mappings = None if mapping is None else (mapping_of(kernel, mapping, arch),)
    return run_generated(kernel, arrays, values, target=target, arch=architecture(arch), mappings=mappings)


# --------------------------------------------------------------------------- measuring and remembering


@dataclass(frozen=True)
class ChoiceResult:
    """Compile's choice for a kernel, whether it came from the cache, and what tuning measured."""

    choice: Any  # polymap.passes.search.choice.KernelChoice
    tuning: tuple  # of polymap.passes.search.tune.NestTuning (empty when not tuned)
    cache: str  # "hit", "miss" or "off"
    warnings: tuple[str, ...] = ()


def tuned_choice(kernel: ir.Kernel, *, arch: Any = "host", params: MappingT[str, int] | None = None,
                 tune: int = 0, cache_dir: str | Path | None = None, arch_fingerprint: str | None = None,
                 options: Any = None, timer: Any = None, verify_hit: bool = True,
                 progress: Any = None, budget: Any = None) -> ChoiceResult:
    """The mapping of every nest as ``compile`` picks it: remembered, or chosen (and, with ``tune`` K, measured).

    ``cache_dir`` None turns the cache off; otherwise an entry for this
    kernel, architecture and shape bucket is used after re-checking it
    (legal, fits, and with ``verify_hit`` verified against the reference), and
    a tuned choice is stored. ``arch_fingerprint`` identifies the
    architecture (:func:`polymap.passes.search.cache.arch_fingerprint` of the
    ``--arch`` text; default: the architecture's data). ``options`` is a
    :class:`~polymap.passes.search.tune.TuneOptions` (its ``k`` is replaced by
    ``tune``); ``timer`` a :class:`~polymap.codegen.timing.Timer`.
    """
    import dataclasses

    from polymap.passes.search.cache import TuningCache, architecture_fingerprint, cache_key
    from polymap.budget import Budget
    from polymap.passes.search.choice import choose
    from polymap.passes.search.remember import recall, remember
    from polymap.passes.search.tune import TuneOptions, tune_choice

    arch_obj = architecture(arch)
    values = param_values(kernel, dict(params or {}))
    store = None if cache_dir is None else TuningCache(Path(cache_dir))
    key = cache_key(kernel, arch_fingerprint or architecture_fingerprint(arch_obj), values)
    warnings: tuple[str, ...] = ()
    if store is not None:
        found = recall(store, key, kernel, arch_obj, values, k=tune, verify=verify_hit)
        warnings = found.warnings
        if found.choice is not None:
            return ChoiceResult(found.choice, (), "hit", warnings)
    # tuning wants more candidates than the model's pick: the search gets longer to find them
    budget = budget if budget is not None else Budget()
    seconds = budget.search_seconds + (2.0 * tune if tune > 0 else 0.0)
    choice = choose(kernel, arch_obj, values, progress=progress, search_top=max(3, tune), search_seconds=seconds,
                    budget=budget)
    status = "off" if store is None else "miss"
    if tune <= 0:
        return ChoiceResult(choice, (), status, warnings)
    opts = dataclasses.replace(options if options is not None else TuneOptions(), k=tune)
    tuned = tune_choice(choice, arch=arch_obj, params=values, options=opts, timer=timer, progress=progress)
    if store is not None:
        remember(store, key, tuned, values)
    return ChoiceResult(tuned.choice, tuned.tuning, status, warnings)


def measure(kernel: ir.Kernel, mappings: Sequence[Any], *, arch: Any = "host",
            params: MappingT[str, int] | None = None, predicted_s: Sequence[float | None] | None = None,
            sources: Sequence[str] | None = None, fixed: Sequence[Any] = (), options: Any = None, timer: Any = None,
            progress: Any = None):
    """Build and time ``mappings`` (of one nest, the model's best first); the fastest is ``chosen``.

    Returns a :class:`~polymap.passes.search.tune.NestTuning` with both
    ranks, Spearman's rho and the bias (``polymap search --tune`` calls this
    with its ranked mappings and their predicted seconds). ``fixed`` are the
    mappings of the kernel's other nests, kept while these are timed.
    """
    from polymap.passes.search.tune import TuneCandidate, TuneOptions, tune

    arch_obj = architecture(arch)
    values = param_values(kernel, dict(params or {}))
    mps = [mapping_of(kernel, m, arch_obj) for m in mappings]
    if not mps:
        raise TypeError("measure() needs at least one mapping")
    preds = list(predicted_s) if predicted_s is not None else [None] * len(mps)
    names = list(sources) if sources is not None else [f"#{k + 1}" for k in range(len(mps))]
    cands = [TuneCandidate(s, m, p) for s, m, p in zip(names, mps, preds)]
    return tune(cands, kernel=kernel, model=build_model(kernel), nest=mps[0].nest, arch=arch_obj, params=values,
                fixed=tuple(mapping_of(kernel, m, arch_obj) for m in fixed), options=options if options is not None else TuneOptions(k=len(mps)), timer=timer, progress=progress)


def calibrate(*, arch: Any = "host", probe: Any = None, timer: Any = None, kernels: Sequence[str] | None = None,
              progress: Any = None):
    """Measure this machine and fit the cost model to it (``polymap calibrate``).

    Returns a :class:`~polymap.machine.calibrate.Calibration`: measured
    bandwidths and FMA rate, the fitted architecture, one derating factor
    per cycle term, and the error before and after over the calibration
    kernels. ``probe`` (a :class:`~polymap.machine.calibrate.Probe`) and
    ``timer`` replace the native measurements.
    """
    from polymap.codegen.timing import ProcessTimer
    from polymap.machine.calibrate import NativeProbe, fit, measure_bandwidths, measured_architecture
    from polymap.machine.calibration_set import KERNELS, calibration_samples
    from polymap.machine.hostinfo import host_info

    before = architecture(arch)
    probe = probe if probe is not None else NativeProbe(host_info().vector_bytes)
    bw = measure_bandwidths(before, probe)
    measured = measured_architecture(before, bw)
    samples = calibration_samples(before, measured, timer if timer is not None else ProcessTimer(),
                                  names=tuple(kernels) if kernels is not None else tuple(KERNELS),
                                  progress=progress)
    if len(samples) < 2:
        from polymap.errors import EnvironmentProblem

        raise EnvironmentProblem("calibrate: fewer than two calibration kernels could be timed")
    return fit(samples, measured, bw, name=f"{before.name}-calibrated")


# --------------------------------------------------------------------------- the HTML report


def report(kernels: Sequence[ir.Kernel], *, arch: Any = "host", mapping: Any = None,
           params: MappingT[str, int] | None = None, loops: tuple[str, str] | None = None,
           fixed: MappingT[str, int] | None = None, statement: str | None = None,
           title: str = "polymap report") -> str:
    """One self-contained HTML page (``polymap report``) for ``kernels``.

    Per kernel: dependences, loop classes, the iteration space of ``loops``
    (other loops at ``fixed``) with its dependences, the legality of the
    mapping (``mapping``, else the default choice of every nest) with its
    witness ringed, the mapping as nested tiles, traffic, energy, the
    roofline and the generated C code.
    """
    from polymap.errors import InputError
    from polymap.passes.search.default_mapping import choose_mappings
    from polymap.reports.html.facts import ReportOptions, gather
    from polymap.reports.html.page import render

    if mapping is not None and len(kernels) != 1:
        raise InputError("--mapping describes one kernel: pick it with --kernel NAME")
    arch_obj = architecture(arch)
    options = ReportOptions(loops=loops, fixed=dict(fixed or {}), statement=statement)
    facts = []
    for k in kernels:
        values = param_values(k, dict(params or {}))
        if mapping is not None:
            mappings, source = (mapping_of(k, mapping, arch_obj),), "given"
        else:
            mappings, source = tuple(choose_mappings(build_model(k), arch_obj, values)), "the default choice"
        facts.append(gather(k, arch_obj, mappings, values, source=source, options=options))
    return render(facts, title=title)


# --------------------------------------------------------------------------- other tools' files


def import_timeloop(problem: str | Path, arch: str | Path, mapping: str | Path | None, out_dir: str | Path):
    """Timeloop v0.4 problem, architecture and mapping files as ``.loop``, ``arch.yaml``, ``mapping.yaml``.

    Returns :class:`~polymap.timeloop.Imported` (the files written, the kernel's
    name, notes on Timeloop levels that became two polymap levels).
    """
    from polymap.timeloop import import_timeloop as run_import

    return run_import(problem, arch, mapping, out_dir)


def export_timeloop(kernel: ir.Kernel, mapping: Any, *, arch: Any, params: MappingT[str, int] | None = None) -> str:
    """A mapping as the text of a Timeloop mapping file (``cost --export timeloop``)."""
    from polymap.timeloop.export import export_mapping

    return export_mapping(kernel, mapping_of(kernel, mapping, arch), param_values(kernel, dict(params or {})))
