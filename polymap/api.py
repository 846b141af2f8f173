"""The Python API: every ``polymap`` command as one function, and the only orchestration.

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

Each command of ``polymap`` parses its arguments, calls one function here
and renders the result (:mod:`polymap.reports`), so the command line and
Python give the same answers by construction. Tuning knobs are frozen
option dataclasses (:class:`CostOptions`, :class:`NestSearchOptions`,
:class:`CompileOptions`, :class:`~polymap.passes.search.choice.ChoiceOptions`)
passed down by keyword; nothing below reads an environment variable.

Arguments are forgiving in the usual ways: ``arch`` is an
:class:`~polymap.machine.arch.Architecture`, a preset name or a YAML path;
``mapping`` a :class:`~polymap.mapping.model.Mapping`, a tuple of them (one
per nest), a dict in the ``mapping.md`` format, a ``compile`` document
(``NAME.json``, read or as a dict) or a path; ``params`` maps parameter
names to values (defaults fill the rest). Errors are the ones of
:mod:`polymap.errors`: ``PolymapError`` for bad input, ``Refusal``
subclasses for a "no".
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping as MappingT, Sequence

import numpy as np

from polymap import ir
from polymap.codegen.c import emitter as c_emitter
from polymap.codegen.loop_emitter import emit_loop
from polymap.codegen.numpy.emitter import emit_numpy
from polymap.codegen.runner import numpy_mapping_arg, run_generated
from polymap.codegen.c.names import DEFAULT_COMMAND
from polymap.codegen.verify_sizes import SizedVerification, verify_written
from polymap.driver import load_program, param_values, parse
from polymap.codegen.timing import ProcessTimer, Timer
from polymap.budget import Budget, ChildFailed, Pending
from polymap.errors import EnvironmentProblem, IllegalTransformation, InputError, InvalidMapping, VerificationFailure
from polymap.limits import Limits, require_integers, require_tractable
from polymap.machine.arch import Architecture
from polymap.machine.calibrate import Calibration, NativeProbe, Probe, fit_rates, measure_bandwidths, measured_architecture
from polymap.machine.calibration_set import KERNELS, calibration_samples
from polymap.machine.hostinfo import host_info
from polymap.machine.presets import load_architecture, presets
from polymap.mapping.documents import DOCUMENT_KEYS, is_document, mappings_from_data
from polymap.mapping.files import MAPPING_KEYS
from polymap.mapping.renamed import in_original_terms
from polymap.mapping.model import Mapping, mapping_loop_extents, nest_loops
from polymap.passes.counting.cost_model import CostReport, Objective, mapping_execution, evaluate
from polymap.passes.counting.convention import count_mapping_timeloop
from polymap.passes.counting.counting import count_mapping
from polymap.passes.counting.fastcount import in_class
from polymap.passes.counting.fit import FitProblem, fanout_problems, fit_problems
from polymap.passes.counting.symbolic_budget import count_symbolic_within
from polymap.passes.counting.variance import Variance, variance
from polymap.passes.dependences.depgraph import dependence_graph
from polymap.passes.dependences.dependences import Dependence, dependences as find_dependences, group
from polymap.passes.dependences.loop_classes import DependenceFacts, LoopClass, dependence_facts, loop_classes
from polymap.passes.frontend.expansion import kernel_for
from polymap.passes.frontend.rename import repeated_loop_names
from polymap.passes.legality.legality import Verdict, check_mapping, is_legal_schedule, schedule_violations
from polymap.passes.schedule.suggest import suggested_mapping
from polymap.passes.schedule.tiling import mapped_schedule, order_mapping
from polymap.passes.search.cache import TuningCache, architecture_fingerprint, cache_key
from polymap.passes.search.cache import arch_fingerprint as spec_fingerprint
from polymap.passes.search.choice import ChoiceOptions, KernelChoice, choose
from polymap.passes.search.executors import DaskExecutor, LocalExecutor, default_workers
from polymap.passes.search.mapsearch import Progress as SearchProgress, SearchOptions
from polymap.passes.search.network import NetworkResult, search_kernels
from polymap.passes.search.numpy_choice import numpy_mappings
from polymap.passes.search.register_mapping import register_tile_doc
from polymap.passes.search.remember import recall, remember
from polymap.passes.search.search import search_mappings
from polymap.passes.search.tune import Confirmation, NestTuning, TuneCandidate, TuneOptions, tune, tune_choice
from polymap.poly import KernelModel, build_model
from polymap.reference import execute
from polymap.reports.compile import OBJECTIVE_WORDS, compile_document
from polymap.reports.html.facts import KernelFacts, ReportOptions, roofline_section, slice_section
from polymap.reports.html.page import render
from polymap.tensors import validate_inputs
from polymap.timeloop import Imported, import_timeloop as run_import
from polymap.timeloop.export import export_mapping
from polymap.yamlsource import read_yaml

if TYPE_CHECKING:  # an annotation only: networkx is imported where a dependence graph is built (a compile
    from networkx import MultiDiGraph  # never builds one, and its import was 0.1-0.3 s of every command's start)

__all__ = ["parse", "load", "model", "dependences", "order_of", "check", "suggest", "cost", "cost_nests",
           "cost_details", "search", "search_ranked", "search_network", "transform", "compile", "choose_mappings",
           "tuned_choice", "measure", "calibrate", "run", "architecture", "architecture_presets",
           "mapping_architecture", "mapping_of", "mappings_of", "report", "report_facts", "import_timeloop",
           "export_timeloop", "CostOptions", "NestSearchOptions", "CompileOptions", "ChoiceOptions", "ReportOptions",
           "SearchOptions", "Objective"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CostOptions:
    """How ``cost`` counts."""

    symbolic: bool = False
    """Also give every count as a piecewise quasi-polynomial in the parameters."""
    convention: str = "exact"
    """``"exact"`` (``mapping.md``) or ``"timeloop"`` (outputs start at zero, ``spatial_reduction``
    levels receive combined partial sums: ``mapping.md``, conventions for comparing with other tools)."""


@dataclass(frozen=True)
class NestSearchOptions:
    """How :func:`search_ranked` ranks the mappings of one nest (the ``search`` command's network
    search has :class:`~polymap.passes.search.mapsearch.SearchOptions`)."""

    objective: Objective = Objective.CYCLES
    """What the ranking minimises (cycles, energy or their product)."""
    top: int = 10
    """How many mappings to return, best first."""
    evaluations: int = 4000
    """Tile vectors evaluated per loop order (work, not time: the same input gives the same answer)."""
    nest: int = 0
    """Which top-level loop nest."""


@dataclass(frozen=True)
class CompileOptions:
    """How ``compile`` maps, writes and verifies."""

    targets: tuple[str, ...] = ("c", "numpy")
    """Code to write and verify: ``"c"``, ``"numpy"``."""
    verify: bool = True
    """Run every target on random inputs and compare with the reference execution."""
    choice: ChoiceOptions = ChoiceOptions()
    """How a mapping is chosen for a nest when none is given."""
    verify_full: bool = False
    """Also verify at the sizes compiled for (verification always runs at reduced sizes that
    exercise every tile edge)."""
    reassociate: bool = False
    """Let floating-point reductions add in another order and contract multiply-adds (FMA)."""
    tune: int = 0
    """Build and time the model's best ``tune`` candidates per nest and keep the fastest (0: no measuring)."""


def load(path: str | Path, *, cpp: str = "") -> ir.Program:
    """Read, parse and check a ``.loop`` file, or a C file's scops (raises ``PolymapError`` with located diagnostics).

    ``cpp`` holds extra preprocessor flags for a C file (``"-I DIR -DN=64"``).
    """
    return load_program(path, cpp=cpp)


def model(kernel: ir.Kernel) -> KernelModel:
    """The polyhedral model: domains, accesses and original schedule as ISL objects."""
    return build_model(kernel)


def architecture(arch: Architecture | str | Path = "host", *, limits: Limits | None = None) -> Architecture:
    """An :class:`~polymap.machine.arch.Architecture` from a preset name, a YAML path or itself."""
    return arch if isinstance(arch, Architecture) else load_architecture(str(arch), limits=limits)


def architecture_presets() -> tuple[str, ...]:
    """The names of the preset architectures (``polymap arch --list``)."""
    return tuple(presets())


MappingArg = Mapping | Sequence[Mapping] | dict | str | Path
ArchArg = Architecture | str | Path


def mappings_of(kernel: ir.Kernel | ir.Program | Sequence[ir.Kernel], mapping: MappingArg,
                arch: Architecture | str | Path = "host", *, limits: Limits | None = None) -> tuple[Mapping, ...]:
    """Validated mappings (one per nest) from any form ``mapping`` may take (see the module docstring)."""
    if isinstance(mapping, Mapping):
        return (mapping,)
    if isinstance(mapping, (tuple, list)) and all(isinstance(m, Mapping) for m in mapping):
        return tuple(mapping)
    if isinstance(mapping, dict):
        return mappings_from_data(mapping, kernel=kernel, arch=architecture(arch), source_name="<mapping>")
    doc = read_yaml(mapping, limits=limits)
    return mappings_from_data(doc.data, kernel=kernel, arch=architecture(arch), source_name=str(mapping),
                              document=doc)


def mapping_architecture(mapping: str | Path, arch: ArchArg | None = None, *,
                         limits: Limits | None = None) -> Architecture:
    """``arch`` when given; else the architecture a compile document (``NAME.json``) names, or the
    preset whose level names the mapping file uses, outermost first (``check`` and ``transform``
    without ``--arch``)."""
    if arch is not None:
        return arch if isinstance(arch, Architecture) else load_architecture(str(arch), limits=limits)
    doc = read_yaml(mapping, limits=limits)
    data = doc.data
    if is_document(data):
        if isinstance(data.get("arch"), str) and data["arch"] in presets():
            return load_architecture(data["arch"])
        entries = data["mappings"] if isinstance(data["mappings"], list) else []
        data = entries[0] if entries and isinstance(entries[0], dict) else {}
    if not isinstance(data, dict):
        doc.fail((), f"a mapping file holds a mapping with keys {', '.join(MAPPING_KEYS)}, or a compile "
                     f"document with keys {', '.join(DOCUMENT_KEYS)}")
    levels = data.get("levels")
    if not isinstance(levels, list):
        doc.fail(("levels",) if "levels" in data else (),
                 "levels: expected a list with one entry per architecture level, outermost first")
    names = [lv.get("level") for lv in levels if isinstance(lv, dict)]
    known = []
    for name in presets():
        arch = load_architecture(name)
        if [lv.name for lv in arch.levels] == names:
            return arch
        known.append(f"{name}: {', '.join(arch.level_names)}")
    doc.fail(("levels",), f"the levels ({', '.join(map(str, names)) or 'none named'}) match no preset "
                          f"architecture ({'; '.join(known)}); give one with --arch")


def mapping_of(kernel: ir.Kernel | Sequence[ir.Kernel], mapping: MappingArg, arch: ArchArg = "host", *,
               limits: Limits | None = None) -> Mapping:
    """The one validated mapping ``mapping`` holds (``InputError`` when it holds several)."""
    found = mappings_of(kernel, mapping, arch, limits=limits)
    if len(found) != 1:
        raise InputError(f"expected one mapping, got {len(found)} (one per nest): use mappings_of()")
    return found[0]


def _values(kernel: ir.Kernel, params: MappingT[str, int] | None) -> dict[str, int]:
    return param_values(kernel, dict(params or {}))


# --------------------------------------------------------------------------- dependences


@dataclass(frozen=True)
class DependenceReport:
    """What ``polymap deps`` prints: the dependences and the class of every loop."""

    kernel: str
    analysis: str  # "value-based" | "memory-based"
    dependences: tuple[Dependence, ...]
    """Per pair of references."""
    loops: dict[str, LoopClass]
    model: KernelModel | None = dataclasses.field(default=None, compare=False, repr=False)
    merged: tuple[DependenceFacts, ...] = ()
    """Merged per kind, statements and tensor, with distances and carrying loops: the rows of ``deps``
    (:mod:`polymap.reports.deps` renders them)."""
    graph: MultiDiGraph | None = dataclasses.field(default=None, compare=False, repr=False)
    """The statement dependence graph (``deps --dot``), when asked for."""


def dependences(kernel: ir.Kernel, *, memory_based: bool = False, graph: bool = False,
                limits: Limits | None = None) -> DependenceReport:
    """Exact dependences (value-based by default) and which loops are parallel or reductions.

    ``graph`` also builds the statement dependence graph; ``limits`` refuses a kernel past them
    before the analyses (``polymap deps`` passes its ``--limit`` values).
    """
    m = build_model(kernel)
    if limits is not None:
        require_tractable(kernel, limits=limits, model=m, what="the dependence analyses")
    deps = find_dependences(m, memory=memory_based)
    merged = tuple(group(deps))
    return DependenceReport(kernel.name, "memory-based" if memory_based else "value-based",
                            tuple(deps), loop_classes(m), m, tuple(dependence_facts(m, d) for d in merged),
                            dependence_graph(m, merged) if graph else None)


# --------------------------------------------------------------------------- legality


def _join(verdicts: Sequence[Verdict]) -> Verdict:
    if len(verdicts) == 1:
        return verdicts[0]
    return Verdict(all(v.legal for v in verdicts), tuple(x for v in verdicts for x in v.violations),
                   tuple(x for v in verdicts for x in v.notes), tuple(x for v in verdicts for x in v.hints))


def order_of(kernel: ir.Kernel, order: Sequence[str]) -> tuple[int, tuple[str, ...]]:
    """The nest whose loops ``order`` names (outer -> inner), and the whole order of that nest (the loops
    not named keep their place after them); unknown or repeated names are an ``InputError``."""
    order = tuple(order)
    text = ",".join(order)
    if not order:
        raise InputError(f"--order {text!r}: name the loops outer -> inner, e.g. --order i,k,j")
    dup = [x for x in order if order.count(x) > 1]
    if dup:
        raise InputError(f"--order {text}: loop '{dup[0]}' is named twice")
    nests = range(len(kernel.nests()))
    for nest in nests:
        loops = nest_loops(kernel, nest)
        if all(x in loops for x in order):
            return nest, order + tuple(x for x in loops if x not in order)
    known = ", ".join("(" + ", ".join(nest_loops(kernel, n)) + ")" for n in nests)
    missing = [x for x in order if all(x not in nest_loops(kernel, n) for n in nests)]
    what = f"kernel '{kernel.name}' has no loop '{missing[0]}'" if missing else "no single nest holds all these loops"
    raise InputError(f"--order {text}: {what} (its nests' loops: {known or 'none'})")


def check(kernel: ir.Kernel, *, order: Sequence[str] | None = None, mapping: MappingArg | None = None,
          arch: Architecture | str | Path | None = None, params: MappingT[str, int] | None = None,
          limits: Limits | None = None) -> Verdict:
    """Is a loop ``order`` (outer -> inner) or a whole ``mapping`` legal?

    Returns a :class:`~polymap.passes.legality.legality.Verdict` (``legal``,
    ``violations`` with witnesses, ``notes``, ``hints``); it never raises
    for an illegal answer. With ``arch``, fan-out and capacity are checked too.
    A mapping of several nests gives one verdict over all of them.
    ``params`` None with a parameter lacking a default: witnesses stay symbolic.
    """
    if (order is None) == (mapping is None):
        raise TypeError("check() needs exactly one of order= or mapping=")
    m = build_model(kernel)
    if limits is not None:
        require_tractable(kernel, limits=limits, model=m, what="the legality checks")
    values = _values(kernel, params) if _all_sized(kernel, params) else None
    if order is not None:
        nest, whole = order_of(kernel, order)
        loops = nest_loops(kernel, nest)
        return _with_fusion_note(kernel, nest, check_mapping(m, order_mapping(kernel, nest, loops, whole),
                                                             params=values))
    arch_obj = architecture(arch) if arch is not None else None
    found = mappings_of(kernel, mapping, arch_obj or "host")
    if any(mp.expand for mp in found):  # the kernel the mappings map (scalars they expand)
        kernel = kernel_for(kernel, found)
        m = build_model(kernel)
    return _join([_with_fusion_note(kernel, mp.nest, check_mapping(m, mp, arch=arch_obj, params=values))
                  for mp in found])


@dataclass(frozen=True)
class Suggestion:
    """``check --suggest``: the nest skewed as the hint says and tiled, and whether that is legal."""

    nest: int
    arch: Architecture
    mapping: Mapping | None
    """None when no small skew makes the nest's band permutable."""
    verdict: Verdict | None


def suggest(kernel: ir.Kernel, nest: int, *, arch: ArchArg = "host",
            params: MappingT[str, int] | None = None) -> Suggestion:
    """The mapping of the skew :func:`check` hints at for ``nest``, tiled on ``arch``, with its verdict."""
    arch_obj = architecture(arch)
    m = build_model(kernel)
    mapping = suggested_mapping(m, nest, arch_obj)
    values = _values(kernel, params) if _all_sized(kernel, params) else None
    verdict = None if mapping is None else check_mapping(m, mapping, params=values)
    return Suggestion(nest, arch_obj, mapping, verdict)


def _with_fusion_note(kernel: ir.Kernel, nest: int, verdict: Verdict) -> Verdict:
    """Say so when loops of the nest share a name: an order names each loop once, so it fuses them."""
    names = repeated_loop_names(kernel).get(nest)
    if not names:
        return verdict
    listed = ", ".join(f"'{x}'" for x in names)
    note = (f"several loops of this nest are named {listed}: an order or mapping names each loop once, "
            f"so it runs them as one loop (fusing them); give them distinct names in the source to "
            f"order them apart")
    return dataclasses.replace(verdict, notes=verdict.notes + (note,))


def _all_sized(kernel: ir.Kernel, params: MappingT[str, int] | None) -> bool:
    given = dict(params or {})
    return all(p.name in given or p.default is not None for p in kernel.params)


# --------------------------------------------------------------------------- counting


def _refuse_unfit(kernel: ir.Kernel, problems: Sequence[FitProblem]) -> None:
    if problems:
        words = [p.describe() for p in problems]
        raise InvalidMapping(f"kernel {kernel.name}: the mapping does not fit:\n  " + "\n  ".join(words),
                             {"kernel": kernel.name, "valid": False, "problems": words,
                              "fit": [p.to_json() for p in problems]})


def cost_nests(kernel: ir.Kernel, mapping: MappingArg, *, arch: Architecture | str | Path,
               params: MappingT[str, int] | None = None, options: CostOptions = CostOptions(),
               budget: Budget | None = None) -> tuple[CostReport, ...]:
    """The cost report of every mapping ``mapping`` holds (one per nest), in its order.

    Raises :class:`~polymap.errors.InvalidMapping` when a mapping does not fit
    (capacity or fan-out, :mod:`polymap.passes.counting.fit`).
    """
    arch_obj = architecture(arch)
    found = mappings_of(kernel, mapping, arch_obj)
    kernel = kernel_for(kernel, found)
    values = _values(kernel, params)
    m = build_model(kernel)
    reports = []
    for mp in found:
        _refuse_unfit(kernel, fit_problems(m, mp, arch_obj, values))
        reports.append(_report(m, mp, arch_obj, values, options, budget))
    return tuple(reports)


def _ranked_elsewhere(choice: KernelChoice | None, mapping: Mapping) -> bool:
    """Was ``mapping`` chosen by its counts at reduced sizes (``Candidate.ranked_at``)?"""
    return choice is not None and any(n.chosen.mapping is mapping and n.chosen.ranked_at for n in choice.nests)


class _Costs:
    """The exact reports compile writes, one per mapping, some perhaps still being counted in a child
    (:func:`_start_costs`): :meth:`result` once, :meth:`cancel` on every path (it ends the child)."""

    def __init__(self, costs: list[CostReport | None], slow: list[int], work: tuple, pending: Pending | None) -> None:
        self._costs, self._slow, self._work, self._pending = costs, slow, work, pending

    def result(self) -> tuple[CostReport | None, ...]:
        if self._slow:
            try:
                counted = _reports(*self._work) if self._pending is None else self._pending.result()
            except ChildFailed:  # counted here again: the same error, raised with its own type
                counted = _reports(*self._work)
            for k, report in zip(self._slow, counted):
                self._costs[k] = report
            self._slow = []
        return tuple(self._costs)

    def cancel(self) -> None:
        if self._pending is not None:
            self._pending.cancel()


def _start_costs(choice: KernelChoice | None, m: KernelModel, mappings: Sequence[Mapping], arch: Architecture,
                 values: dict[str, int], budget: Budget | None) -> _Costs:
    """The exact reports compile writes, one per mapping: None for a mapping ranked at reduced sizes (no
    counts at these); the choice's own report where it counted that very mapping at these sizes (counting
    a winner again cost gramschmidt at LARGE seconds of CPU); counted here in the fast path's class
    (milliseconds; where its counts are inexact, ISL counts the rest with its footprints: conv2d's hit,
    0.1 s, less than a child costs); the rest, counted by ISL whole (seconds: syrk's remembered blocking,
    half of its hit), in a child of ``budget`` started now, while compile generates and verifies the code
    on the other core (:meth:`~polymap.budget.Budget.start`; without a budget, when asked for)."""
    costs: list[CostReport | None] = []
    slow: list[int] = []
    for k, mp in enumerate(mappings):
        known = None
        if not _ranked_elsewhere(choice, mp):
            known = None if choice is None else choice.report_of(mp, arch, values)
            if known is None and in_class(m, mp, values):
                known = _report(m, mp, arch, values, CostOptions())
            elif known is None:
                slow.append(k)
        costs.append(known)
    checked = [(n.chosen.mapping, n.chosen.footprints) for n in (choice.nests if choice is not None else ())]
    work = (m, tuple(mappings[k] for k in slow), arch, values,
            tuple(next((fp for mp, fp in checked if mp is mappings[k]), ()) or None for k in slow))
    pending = None
    if slow and budget is not None:
        pending = budget.start(_reports, work, what=f"the exact counts of kernel '{m.kernel.name}'")
    return _Costs(costs, slow, work, pending)


def _reports(m: KernelModel, mappings: Sequence[Mapping], arch: Architecture, values: dict[str, int],
             footprints: Sequence[tuple | None]) -> tuple[CostReport, ...]:
    """The exact report of each mapping at ``values`` (what :func:`_start_costs` counts in its child), with
    the footprints its fit was checked on where there are some (not counted again)."""
    return tuple(_report(m, mp, arch, values, CostOptions(), footprints=fp) for mp, fp in zip(mappings, footprints))


def _with_reports(choice: KernelChoice | None, mappings: Sequence[Mapping],
                  costs: Sequence[CostReport | None]) -> KernelChoice | None:
    """``choice`` with each chosen candidate's report where it had none and compile counted one at its
    sizes (a remembered mapping outside the fast path's class: :func:`_start_costs`), so that the ranking
    in ``NAME.json`` and the summary show the counts that were written."""
    if choice is None:
        return None
    nests = []
    for nc in choice.nests:
        c = nc.chosen
        report = next((r for mp, r in zip(mappings, costs) if mp is c.mapping), None)
        if c.report is not None or c.ranked_at or report is None:
            nests.append(nc)
            continue
        new = dataclasses.replace(c, report=report)
        nests.append(dataclasses.replace(nc, chosen=new, candidates=tuple(new if x is c else x
                                                                          for x in nc.candidates)))
    return dataclasses.replace(choice, nests=tuple(nests))


def _report(m: KernelModel, mp: Mapping, arch: Architecture, values: dict[str, int],
            options: CostOptions, budget: Budget | None = None, *,
            footprints: tuple[tuple[int, int] | None, ...] | None = None) -> CostReport:
    """The cost report of ``mp`` at ``values`` by the options' convention; ``footprints``: every level's, known
    from a fit check (exact counts only, :func:`~polymap.passes.counting.counting.count_mapping`)."""
    if options.convention not in ("exact", "timeloop"):
        raise InputError(f"--convention {options.convention}: expected exact or timeloop")
    if options.convention == "timeloop":
        if options.symbolic:
            raise InputError("--convention timeloop counts numbers only: leave out --symbolic")
        counts = count_mapping_timeloop(m, mp, arch, params=values)
    elif options.symbolic:
        counts = count_symbolic_within(m, mp, arch, params=values, budget=budget)
    else:
        counts = count_mapping(m, mp, arch, params=values, footprints=footprints)
    return evaluate(counts, arch, execution=mapping_execution(m, mp, arch, loop_extents_of(m, mp, values)))


def loop_extents_of(m: KernelModel, mapping: Mapping, values: MappingT[str, int]) -> dict[str, int]:
    """The extent of every loop of ``mapping`` at ``values`` (what tiles and trip counts are taken of)."""
    return mapping_loop_extents(m.kernel, mapping, values, model=m)


def cost(kernel: ir.Kernel, mapping: MappingArg, *, arch: Architecture | str | Path,
         params: MappingT[str, int] | None = None, options: CostOptions = CostOptions(),
         budget: Budget | None = None) -> CostReport:
    """Exact traffic, energy, cycles and intensity of one mapping (``mapping.md``).

    ``convention="timeloop"`` counts as Timeloop does (outputs start at zero,
    ``spatial_reduction`` levels receive combined partial sums).
    Returns a :class:`~polymap.passes.counting.cost_model.CostReport`; raises
    :class:`~polymap.errors.InvalidMapping` when the mapping does not fit.
    """
    reports = cost_nests(kernel, mapping, arch=arch, params=params, options=options, budget=budget)
    if len(reports) != 1:
        raise InputError(f"expected one mapping, got {len(reports)} (one per nest): use cost_nests()")
    return reports[0]


def cycle_spread(kernel: ir.Kernel, mapping: Mapping, report: CostReport, *, arch: Architecture | str | Path,
                 params: MappingT[str, int] | None = None) -> Variance:
    """The pessimistic cycles of ``mapping`` next to the nominal ones of ``report``
    (:mod:`polymap.passes.counting.variance`)."""
    values = _values(kernel, params)
    extents = mapping_loop_extents(kernel, mapping, values)
    return variance(kernel, mapping, architecture(arch), report.cycle_terms, extents, values)


@dataclass(frozen=True)
class NestCost:
    """What ``polymap cost`` says of one mapping: its report, its pessimistic cycles, and whether it is legal
    (an illegal mapping is counted anyway, with a note)."""

    mapping: Mapping
    report: CostReport
    spread: Variance
    legal: bool


def cost_details(kernel: ir.Kernel, mapping: MappingArg, *, arch: ArchArg, params: MappingT[str, int] | None = None,
                 options: CostOptions = CostOptions(), budget: Budget | None = None,
                 limits: Limits | None = None) -> tuple[NestCost, ...]:
    """``polymap cost``: per mapping ``mapping`` holds, :func:`cost_nests`'s report, :func:`cycle_spread`
    and :func:`is_legal` (raises :class:`~polymap.errors.InvalidMapping` when one does not fit)."""
    arch_obj = architecture(arch)
    mappings = mappings_of(kernel, mapping, arch_obj, limits=limits)
    kernel = kernel_for(kernel, mappings)
    if limits is not None:
        require_tractable(kernel, limits=limits, model=build_model(kernel), what="the counts")
    reports = cost_nests(kernel, mappings, arch=arch_obj, params=params, options=options, budget=budget)
    return tuple(NestCost(mp, r, cycle_spread(kernel, mp, r, arch=arch_obj, params=params), is_legal(kernel, mp))
                 for mp, r in zip(mappings, reports))


def is_legal(kernel: ir.Kernel, mapping: Mapping) -> bool:
    """Does ``mapping`` keep every reaching and final writer (no witnesses, for notes)?"""
    m = build_model(kernel_for(kernel, (mapping,)))
    return is_legal_schedule(m, mapped_schedule(m, mapping))


def search_ranked(kernel: ir.Kernel, *, arch: Architecture | str | Path = "host",
                  params: MappingT[str, int] | None = None,
                  options: NestSearchOptions = NestSearchOptions()) -> list[tuple[Mapping, CostReport]]:
    """The best legal, fitting mappings of one nest with their cost reports, best first by the objective."""
    return search_mappings(build_model(kernel), options.nest, architecture(arch), _values(kernel, params),
                           top=options.top, budget=options.evaluations, seconds=None,
                           objective=options.objective)


def search(kernel: ir.Kernel, *, arch: Architecture | str | Path = "host", params: MappingT[str, int] | None = None,
           options: NestSearchOptions = NestSearchOptions()) -> list[Mapping]:
    """The best legal, fitting mappings of one nest, best first (:func:`search_ranked` without the reports)."""
    return [mp for mp, _ in search_ranked(kernel, arch=arch, params=params, options=options)]


@dataclass(frozen=True)
class NetworkSearch:
    """``polymap search``: the search of every nest, and what ``--tune`` measured of the best ones."""

    network: NetworkResult
    tunings: dict[tuple[str, int], NestTuning]
    """Per (kernel, nest) with at least two mappings found: the best ``tune`` built and timed."""


def search_network(kernels: Sequence[ir.Kernel], *, arch: ArchArg = "host", params: MappingT[str, int] | None = None,
                   options: SearchOptions | None = None, workers: int | None = None, scheduler: str | None = None,
                   progress: Callable[[str, SearchProgress], None] | None = None, tune: int = 0,
                   timer: Timer | None = None, tune_progress: Progress | None = None) -> NetworkSearch:
    """``polymap search``: every nest of every kernel searched over its pruned mapspace, best first.

    ``options`` is a :class:`~polymap.passes.search.mapsearch.SearchOptions`
    (objective, top, evaluation budget); the work runs on ``workers`` local
    processes (None: the cores) or on the Dask scheduler at ``scheduler``
    (``tcp://HOST:PORT``), with the same answer. The result's ``network`` is a
    :class:`~polymap.passes.search.network.NetworkResult` (per layer: the
    best mappings with their ISL-confirmed costs, the space and what was
    pruned, lower bounds per level; totals). With ``tune`` K the best K
    mappings of every nest are built and timed (:func:`measure`, the other
    nests of the kernel at their best).
    """
    if tune < 0:
        raise InputError("--tune takes a number of mappings (0 or more)")
    if workers is not None and workers < 1:
        raise InputError("--workers takes a positive number")
    options = options or SearchOptions()
    options = dataclasses.replace(options, top=max(options.top, tune))  # tuning needs that many candidates
    arch_obj = architecture(arch)
    executor = DaskExecutor(scheduler) if scheduler else LocalExecutor(workers or default_workers())
    net = search_kernels(tuple(kernels), arch_obj, dict(params or {}), options=options, executor=executor,
                         progress=progress)
    tunings = {}
    for layer in net.layers if tune else ():
        found = layer.result.found[:tune]
        if len(found) < 2:
            continue
        kernel = next(kn for kn in kernels if kn.name == layer.kernel)
        fixed = [other.result.best.mapping for other in net.layers
                 if other.kernel == layer.kernel and other.nest != layer.nest and other.result.best is not None]
        tunings[layer.kernel, layer.nest] = measure(
            kernel, [f.mapping for f in found], arch=arch_obj, params=layer.params,
            predicted_s=[f.cost.seconds for f in found], sources=[f"search #{r}" for r in range(1, len(found) + 1)],
            fixed=fixed, timer=timer, progress=tune_progress)
    return NetworkSearch(net, tunings)


# --------------------------------------------------------------------------- code


def _refuse_illegal(kernel: ir.Kernel, m: KernelModel, mappings: Sequence[Mapping],
                    values: MappingT[str, int] | None) -> None:
    for mp in mappings:
        bad = schedule_violations(m, mapped_schedule(m, mp), params=values)
        if bad:
            raise IllegalTransformation(
                f"kernel {kernel.name}: the mapping is illegal:\n" + "\n".join(f"  {v.reason}" for v in bad),
                {"kernel": kernel.name, "legal": False, "violations": [v.to_json() for v in bad]})


def transform(kernel: ir.Kernel, mapping: MappingArg, *, arch: Architecture | str | Path = "host",
              params: MappingT[str, int] | None = None, limits: Limits | None = None) -> str:
    """The mapped nest as ``.loop`` source that parses again and computes the same results.

    ``params`` become the printed parameters' defaults. Refuses an illegal
    mapping (:class:`~polymap.errors.IllegalTransformation`).
    """
    m = build_model(kernel)
    if limits is not None:
        require_tractable(kernel, limits=limits, model=m, what="the legality checks")
    mp = mapping_of(kernel, mapping, arch)
    if mp.expand:
        kernel = kernel_for(kernel, (mp,))
        m = build_model(kernel)
    _refuse_illegal(kernel, m, (mp,), _values(kernel, params) if _all_sized(kernel, params) else None)
    given = dict(params or {})
    shown = dataclasses.replace(kernel, params=tuple(
        dataclasses.replace(p, default=given.get(p.name, p.default)) for p in kernel.params))
    return emit_loop(shown, build_model(shown), mp)


@dataclass(frozen=True)
class CompiledKernel:
    """What ``compile`` produced for one kernel, and every decision behind it."""

    kernel: ir.Kernel
    """The kernel the code was generated for (loops sharing a name renamed apart when chosen)."""
    arch: Architecture
    params: tuple[tuple[str, int], ...]
    mappings: tuple[Mapping, ...]
    """One per mapped nest; a nest without one keeps its original schedule."""
    why: str
    """Where the mappings come from (the user's, or the choice)."""
    costs: tuple[CostReport | None, ...]
    """The cost report of each mapping, in order; None for one ranked at reduced sizes (its exact
    counts beyond the work budget, ``Candidate.ranked_at``)."""
    choice: KernelChoice | None
    """The ranking of every nest's candidates (None when the mapping was given)."""
    c_source: str
    numpy_source: str
    targets: tuple[str, ...]
    files: tuple[str, ...]
    verification: SizedVerification | None
    """The comparison with the reference execution (None without verification)."""
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    """More of ``NAME.json``: the NumPy target's mappings, the register tiles, and what the command
    line adds (the tuning cache's answer, the measurements)."""
    numpy_mappings: tuple[Mapping, ...] = ()
    """The NumPy target's mappings (its own choice, whole-array blocks, unless a mapping was given)."""
    written_mappings: tuple[Mapping, ...] = ()
    """``mappings`` said of the kernel as written (loops renamed apart become ``schedule`` entries):
    what ``NAME.json`` records."""
    tuning: tuple[NestTuning, ...] = ()
    """What ``--tune`` measured per nest (empty without tuning)."""
    warnings: tuple[str, ...] = ()
    """What the tuning cache had to say (an entry dropped, unreadable or failing verification)."""

    @property
    def name(self) -> str:
        return self.kernel.name


def choose_mappings(kernel: ir.Kernel, *, arch: Architecture | str | Path = "host",
                    params: MappingT[str, int] | None = None, options: ChoiceOptions = ChoiceOptions(),
                    progress: Progress | None = None) -> KernelChoice:
    """The mapping ``compile`` chooses for every nest (renaming loops that share a name first)."""
    return choose(kernel, architecture(arch), _values(kernel, params), options=options, progress=progress)


def compile(kernel: ir.Kernel, *, arch: Architecture | str | Path = "host",  # noqa: A001 - the command's name
            mapping: MappingArg | None = None, params: MappingT[str, int] | None = None,
            out_dir: str | Path | None = None, options: CompileOptions = CompileOptions(),
            progress: Progress | None = None, choice: KernelChoice | None = None, why: str | None = None,
            extra: MappingT[str, Any] | None = None, command: str = DEFAULT_COMMAND,
            budget: Budget | None = None, cache_dir: str | Path | None = None, arch_fingerprint: str | None = None,
            timer: Timer | None = None, limits: Limits | None = None) -> CompiledKernel:
    """Tiled C and NumPy code for ``kernel``, verified against the reference execution.

    Without ``mapping`` every nest gets the mapping of
    :func:`~polymap.passes.search.choice.choose` (as ``polymap compile``); with
    ``cache_dir`` a tuned choice remembered there for this shape bucket is used
    after re-checking it, and with ``options.tune`` the best candidates are
    measured (:func:`tuned_choice`); a remembered mapping whose code fails
    verification is dropped and the choice made again (``warnings`` says so).
    With ``out_dir`` the files ``NAME.c``, ``NAME.py`` and ``NAME.json``
    (the mappings and their cost documents, :func:`polymap.reports.compile.compile_document`)
    are written there. Raises ``IllegalTransformation`` for an illegal
    mapping, ``InvalidMapping`` for spatial loops beyond the fan-out, and
    ``VerificationFailure`` when the generated code disagrees with the reference.
    """
    if options.tune < 0:
        raise InputError(f"--tune {options.tune}: expected a number of candidates (0 or more)")
    arch_obj = architecture(arch, limits=limits)
    if limits is not None:
        require_tractable(kernel, limits=limits, model=build_model(kernel), what="compile's analyses")
        require_integers(kernel, _values(kernel, params), limits=limits)
    if mapping is not None or choice is not None:
        recorded = {"cache": "off", **(extra or {})} if mapping is not None else dict(extra or {})
        return _compile_with(kernel, arch_obj, mapping, params, out_dir, options, progress, choice, why, recorded,
                             command, budget)
    values = _values(kernel, params)
    fingerprint = arch_fingerprint or _fingerprint(arch, arch_obj)
    # a hit's code is verified by compile's own verification, and its exact reports are counted while that
    # code is generated and verified (_start_costs)
    found = tuned_choice(kernel, arch=arch_obj, params=values, tune=options.tune, cache_dir=cache_dir,
                         arch_fingerprint=fingerprint, verify_hit=False, timer=timer, progress=progress,
                         choice_options=options.choice, budget=budget, count_hit=False)
    warnings = found.warnings
    try:
        return _compile_found(kernel, arch_obj, values, out_dir, options, progress, found, why, extra, command,
                              budget, warnings)
    except VerificationFailure:
        if found.cache != "hit" or cache_dir is None:
            raise
    # a remembered mapping whose code disagrees with the reference is dropped, never trusted
    TuningCache(Path(cache_dir)).discard(cache_key(kernel, fingerprint, values))
    warnings += (f"the remembered mapping of kernel {kernel.name} failed verification; dropped from the cache, "
                 f"choosing again",)
    found = tuned_choice(kernel, arch=arch_obj, params=values, tune=options.tune, cache_dir=cache_dir,
                         arch_fingerprint=fingerprint, timer=timer, progress=progress, choice_options=options.choice,
                         budget=budget)
    return _compile_found(kernel, arch_obj, values, out_dir, options, progress,
                          dataclasses.replace(found, cache="miss"), why, extra, command, budget,
                          warnings + found.warnings)


def _written(original: ir.Kernel, choice: KernelChoice | None, mapping: Mapping) -> Mapping:
    """``mapping`` as ``NAME.json`` records it: said of the kernel as written (renamed loops become schedule
    entries), with the scalars the choice expanded (``expand``), so that every command reading it maps the
    kernel compile mapped."""
    if choice is None:  # a given mapping: already of the kernel as written, with its own expand
        return mapping
    return dataclasses.replace(in_original_terms(original, choice.kernel, mapping), expand=choice.expanded)


def _fingerprint(arch: ArchArg, arch_obj: Architecture) -> str:
    """What remembered choices are keyed by: the ``--arch`` text (host's processor, a file's content), or an
    object's data."""
    if isinstance(arch, Architecture):
        return architecture_fingerprint(arch_obj)
    try:
        return spec_fingerprint(str(arch))
    except OSError as exc:
        raise InputError(f"--arch {arch}: cannot read the file: {exc.strerror or exc}") from None


def _compile_found(kernel: ir.Kernel, arch: Architecture, values: dict[str, int], out_dir: str | Path | None,
                   options: CompileOptions, progress: Progress | None, found: ChoiceResult, why: str | None,
                   extra: MappingT[str, Any] | None, command: str, budget: Budget | None,
                   warnings: tuple[str, ...]) -> CompiledKernel:
    """Compile ``found`` (a remembered, tuned or plain choice), saying where it came from."""
    if why is None and found.cache == "hit":
        why = "the tuned mapping remembered for this shape bucket (re-checked: legal, fits)"
    elif why is None and found.confirmation is not None and found.confirmation.kept == "untuned":
        why = ("the model's pick: the fastest measured candidates were not measurably faster when the whole "
               "kernel was timed side by side with it")
    elif why is None and found.tuning:
        why = f"the fastest measured of the model's best {options.tune} candidates of each nest"
    recorded = {"cache": found.cache, "tuning": [t.to_json() for t in found.tuning], **(extra or {})}
    if found.confirmation is not None:
        recorded["tuning_confirmed"] = found.confirmation.to_json()
    # a remembered mapping's code is verified at a partial tile after full ones at every level (its every
    # edge was verified when it was chosen and stored; docs/design.md, "A hit's cost")
    result = _compile_with(kernel, arch, None, values, out_dir, options, progress, found.choice, why, recorded,
                           command, budget, verify_edges="partial" if found.cache == "hit" else "every")
    return dataclasses.replace(result, tuning=tuple(found.tuning), warnings=tuple(warnings))


def _compile_with(kernel: ir.Kernel, arch: ArchArg, mapping: MappingArg | None, params: MappingT[str, int] | None,
                  out_dir: str | Path | None, options: CompileOptions, progress: Progress | None,
                  choice: KernelChoice | None, why: str | None, extra: MappingT[str, Any] | None, command: str,
                  budget: Budget | None, *, verify_edges: str = "every") -> CompiledKernel:
    """Code, verification and files for the given mapping, or for ``choice`` (made here when None);
    ``verify_edges`` is the edge set verification runs (:func:`~polymap.codegen.verify_sizes.plan_sizes`)."""
    arch_obj = architecture(arch)
    values = _values(kernel, params)
    original = kernel
    if mapping is not None:
        mappings = mappings_of(kernel, mapping, arch_obj)
        kernel = kernel_for(kernel, mappings)
        m = build_model(kernel)
        _refuse_illegal(kernel, m, mappings, values)
        for mp in mappings:
            _refuse_unfit(kernel, fanout_problems(mp, arch_obj, loop_extents_of(m, mp, values)))
        why = why or "the given mapping"
        choice = None
    else:
        if choice is None:
            choice = choose(kernel, arch_obj, values, options=options.choice, progress=progress, budget=budget)
        kernel, m, mappings = choice.kernel, choice.model, choice.mappings
        why = why or (f"the best legal, fitting candidate of each nest by exact counts "
                      f"({OBJECTIVE_WORDS[options.choice.objective]})")
    if progress:
        progress("generating code...")
    if budget is not None:
        budget.check(f"the code generation of kernel '{kernel.name}' (costs, C and NumPy)")
    # counted while the code is generated and verified (a child, where ISL counts them)
    costs = _start_costs(choice, m, mappings, arch_obj, values, budget)
    try:
        if budget is not None:  # the stage a refusal names (the child's start named its own)
            budget.check(f"the code generation of kernel '{kernel.name}' (costs, C and NumPy)")
        return _generate(original, kernel, m, mappings, arch_obj, values, out_dir, options, progress, choice, why,
                         extra, command, budget, costs, verify_edges=verify_edges)
    finally:
        costs.cancel()


def _generate(original: ir.Kernel, kernel: ir.Kernel, m: KernelModel, mappings: Sequence[Mapping],
              arch_obj: Architecture, values: dict[str, int], out_dir: str | Path | None, options: CompileOptions,
              progress: Progress | None, choice: KernelChoice | None, why: str, extra: MappingT[str, Any] | None,
              command: str, budget: Budget | None, counting: _Costs, *, verify_edges: str) -> CompiledKernel:
    """:func:`_compile_with`'s code, verification and files; ``counting`` gives the reports (:func:`_start_costs`)."""
    c_source = c_emitter.emit_c(kernel, m, mappings, arch=arch_obj, params=values, command=command,
                      reassociate=options.reassociate)
    # without a given mapping the NumPy target gets its own choice (whole-array blocks)
    numpy_maps = (tuple(mappings) if choice is None
                  else tuple(numpy_mappings(m, arch_obj, values, reassociate=options.reassociate)))
    numpy_source = emit_numpy(kernel, m, numpy_mapping_arg(numpy_maps), reassociate=options.reassociate)
    recorded: dict[str, Any] = {}
    if choice is not None:  # mappings said of the kernel as written (renamed loops become schedule entries)
        recorded["numpy_mappings"] = [_written(original, choice, mp).to_dict() for mp in numpy_maps]
    recorded["register_tiles"] = register_tile_doc(m, mappings, arch_obj)
    recorded.update(extra or {})
    result = CompiledKernel(kernel, arch_obj, tuple(sorted(values.items())), tuple(mappings), why, (), choice,
                            c_source, numpy_source, tuple(options.targets), (), None, recorded, numpy_maps,
                            tuple(_written(original, choice, mp) for mp in mappings))
    verification = None
    out = None if out_dir is None else Path(out_dir)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    if options.verify:
        # the very text written, at sizes that exercise every tile edge, before it is written as good
        if progress:
            progress("verifying...")
        sources = {"c": c_source, "numpy": numpy_source}
        try:
            verification = verify_written(kernel, values, {t: sources[t] for t in options.targets}, model=m,
                                          mappings=tuple(mappings) + tuple(numpy_maps), full=options.verify_full,
                                          budget=budget, edges=verify_edges)
        except VerificationFailure as exc:
            if out is None:
                raise
            kept = _write_unverified(out, kernel.name, c_source, numpy_source)
            raise VerificationFailure(f"{exc.message}\n  not written as {kernel.name}.c: the code that failed is "
                                      f"in {', '.join(kept)}", exc.payload) from None
        result = dataclasses.replace(result, verification=verification)
    costs = counting.result()
    choice = _with_reports(choice, mappings, costs)
    result = dataclasses.replace(result, costs=costs, choice=choice)
    if out is not None:
        written = []
        for suffix, text in ((".c", c_source), (".py", numpy_source)):
            (out / f"{kernel.name}{suffix}").write_text(text)
            written.append(str(out / f"{kernel.name}{suffix}"))
        doc = compile_document(kernel.name, values, arch_obj, why, result.written_mappings, costs, choice,
                               result.extra)
        if verification is not None:
            doc["verification"] = verification.to_dict()
        (out / f"{kernel.name}.json").write_text(json.dumps(doc, indent=2) + "\n")
        written.append(str(out / f"{kernel.name}.json"))
        result = dataclasses.replace(result, files=tuple(written))
    return result


def _write_unverified(out_dir: Path, name: str, c_source: str, numpy_source: str) -> list[str]:
    """The sources that failed verification, under names that say so (``NAME.unverified.c``)."""
    kept = []
    for suffix, text in ((".unverified.c", c_source), (".unverified.py", numpy_source)):
        path = out_dir / f"{name}{suffix}"
        path.write_text(text)
        kept.append(str(path))
    return kept


def run(kernel: ir.Kernel, arrays: MappingT[str, np.ndarray], *, params: MappingT[str, int] | None = None,
        target: str = "reference", mapping: MappingArg | None = None, arch: Architecture | str | Path = "host",
        choice: ChoiceOptions = ChoiceOptions(), limits: Limits | None = None) -> dict[str, np.ndarray]:
    """Run ``kernel`` on ``arrays`` (every ``in``/``inout`` tensor); return every ``out``/``inout`` tensor.

    ``target`` is ``"reference"`` (the original program, straight from the
    IR), ``"c"`` or ``"numpy"`` (generated code for ``mapping``, or for the
    mappings ``compile`` chooses for that target with the same ``choice`` options).
    """
    values = _values(kernel, params)
    if limits is not None:
        require_integers(kernel, values, limits=limits, what="a run")
        if target != "reference":  # generated code: compile's analyses first
            require_tractable(kernel, limits=limits, model=build_model(kernel), what="the code generation")
    validate_inputs(kernel, arrays, values, allow_extra=True)
    if target == "reference":
        return execute(kernel, dict(arrays), values)
    if target not in ("c", "numpy"):
        raise InputError(f"--target {target}: expected reference, c or numpy")
    arch_obj = architecture(arch)
    if mapping is not None:
        mappings = mappings_of(kernel, mapping, arch_obj, limits=limits)
        kernel = kernel_for(kernel, mappings)
        m = build_model(kernel)
        _refuse_illegal(kernel, m, mappings, values)
    else:
        chosen = choose(kernel, arch_obj, values, options=choice)
        kernel, m, mappings = chosen.kernel, chosen.model, chosen.mappings
        if target == "numpy":  # as compile: the NumPy target's own choice
            mappings = tuple(numpy_mappings(m, arch_obj, values))
    return run_generated(kernel, arrays, values, target=target, mappings=mappings, model=m)


# --------------------------------------------------------------------------- measuring and remembering


@dataclass(frozen=True)
class ChoiceResult:
    """Compile's choice for a kernel, whether it came from the cache, and what tuning measured."""

    choice: KernelChoice
    tuning: tuple[NestTuning, ...]  # empty when not tuned
    cache: str  # "hit", "miss" or "off"
    warnings: tuple[str, ...] = ()
    confirmation: Confirmation | None = None  # the tuned kernel against the untuned, when they differed


def tuned_choice(kernel: ir.Kernel, *, arch: ArchArg = "host", params: MappingT[str, int] | None = None,
                 tune: int = 0, cache_dir: str | Path | None = None, arch_fingerprint: str | None = None,
                 options: TuneOptions | None = None, timer: Timer | None = None, verify_hit: bool = True,
                 progress: Progress | None = None, choice_options: ChoiceOptions | None = None,
                 budget: Budget | None = None, count_hit: bool = True) -> ChoiceResult:
    """The mapping of every nest as ``compile`` picks it: remembered, or chosen (and, with ``tune`` K, measured).

    ``cache_dir`` None turns the cache off; otherwise an entry for this
    kernel, architecture and shape bucket is used after re-checking it
    (legal, fits, and with ``verify_hit`` verified against the reference), and
    a tuned choice is stored. ``arch_fingerprint`` identifies the
    architecture (:func:`polymap.passes.search.cache.arch_fingerprint` of the
    ``--arch`` text; default: the architecture's data). ``options`` is a
    :class:`~polymap.passes.search.tune.TuneOptions` (its ``k`` is replaced by
    ``tune``); ``timer`` a :class:`~polymap.codegen.timing.Timer`. ``count_hit`` false leaves a remembered
    mapping's report uncounted where the fast path cannot count it (compile counts it while it writes the code).
    """

    arch_obj = architecture(arch)
    values = param_values(kernel, dict(params or {}))
    store = None if cache_dir is None else TuningCache(Path(cache_dir))
    key = cache_key(kernel, arch_fingerprint or architecture_fingerprint(arch_obj), values)
    warnings: tuple[str, ...] = ()
    if store is not None:
        found = recall(store, key, kernel, arch_obj, values, k=tune, verify=verify_hit, count=count_hit)
        warnings = found.warnings
        if found.choice is not None:
            return ChoiceResult(found.choice, (), "hit", warnings)
    # tuning wants more candidates than the model's pick: the search confirms more of them, and the ones
    # whose compute term loses are counted too (the timings may prefer them)
    chosen_by = choice_options if choice_options is not None else ChoiceOptions()
    if tune > 0:
        chosen_by = dataclasses.replace(chosen_by, search_top=max(chosen_by.search_top, tune), count_losers=True)
    choice = choose(kernel, arch_obj, values, progress=progress, budget=budget, options=chosen_by)
    status = "off" if store is None else "miss"
    if tune <= 0:
        return ChoiceResult(choice, (), status, warnings)
    opts = dataclasses.replace(options if options is not None else TuneOptions(), k=tune)
    tuned = tune_choice(choice, arch=arch_obj, params=values, options=opts, timer=timer, progress=progress)
    if store is not None:
        remember(store, key, tuned, values)
    return ChoiceResult(tuned.choice, tuned.tuning, status, warnings, tuned.confirmation)


def measure(kernel: ir.Kernel, mappings: Sequence[MappingArg], *, arch: ArchArg = "host",
            params: MappingT[str, int] | None = None, predicted_s: Sequence[float | None] | None = None,
            sources: Sequence[str] | None = None, fixed: Sequence[MappingArg] = (),
            options: TuneOptions | None = None, timer: Timer | None = None,
            progress: Progress | None = None) -> NestTuning:
    """Build and time ``mappings`` (of one nest, the model's best first); the fastest is ``chosen``.

    Returns a :class:`~polymap.passes.search.tune.NestTuning` with both
    ranks, Spearman's rho and the bias (``polymap search --tune`` calls this
    with its ranked mappings and their predicted seconds). ``fixed`` are the
    mappings of the kernel's other nests, kept while these are timed.
    """

    arch_obj = architecture(arch)
    values = param_values(kernel, dict(params or {}))
    mps = [mapping_of(kernel, m, arch_obj) for m in mappings]
    if not mps:
        raise TypeError("measure() needs at least one mapping")
    others = tuple(mapping_of(kernel, m, arch_obj) for m in fixed)
    kernel = kernel_for(kernel, mps + list(others))
    preds = list(predicted_s) if predicted_s is not None else [None] * len(mps)
    names = list(sources) if sources is not None else [f"#{k + 1}" for k in range(len(mps))]
    cands = [TuneCandidate(s, m, p) for s, m, p in zip(names, mps, preds)]
    return tune(cands, kernel=kernel, model=build_model(kernel), nest=mps[0].nest, arch=arch_obj, params=values,
                fixed=others, options=options if options is not None else TuneOptions(k=len(mps)), timer=timer, progress=progress)


def calibrate(*, arch: ArchArg = "host", probe: Probe | None = None, timer: Timer | None = None,
              kernels: Sequence[str] | None = None, progress: Progress | None = None,
              budget: Budget | None = None) -> Calibration:
    """Measure this machine and fit the cost model to it (``polymap calibrate``).

    Returns a :class:`~polymap.machine.calibrate.Calibration`: measured
    bandwidths and FMA rate, the fitted architecture, one derating factor
    per cycle term, and the error before and after over the calibration
    kernels. ``probe`` (a :class:`~polymap.machine.calibrate.Probe`) and
    ``timer`` replace the native measurements. ``budget`` bounds each calibration
    kernel's choice (compile's default).
    """

    before = architecture(arch)
    probe = probe if probe is not None else NativeProbe(host_info().vector_bytes)
    bw = measure_bandwidths(before, probe)
    measured = measured_architecture(before, bw)
    samples = calibration_samples(before, measured, timer if timer is not None else ProcessTimer(),
                                  names=tuple(kernels) if kernels is not None else tuple(KERNELS),
                                  progress=progress, budget=budget)
    if len(samples) < 2:

        raise EnvironmentProblem("calibrate: fewer than two calibration kernels could be timed")
    return fit_rates(samples, before, measured, bw, name=f"{before.name}-calibrated")


# --------------------------------------------------------------------------- the HTML report


def report_facts(kernels: Sequence[ir.Kernel], *, arch: ArchArg = "host", mapping: MappingArg | None = None,
                 params: MappingT[str, int] | None = None, options: ReportOptions = ReportOptions(),
                 choice: ChoiceOptions = ChoiceOptions(), progress: Progress | None = None,
                 budget: Budget | None = None) -> tuple[KernelFacts, ...]:
    """What :func:`report` shows of each kernel, gathered from the API's own answers.

    The mapping is ``mapping``, else compile's choice (:func:`choose_mappings`, the same
    function and ``choice`` options as :func:`compile`); the first nest's is checked
    and costed, every nest's goes into the C code, printed as ``compile`` prints it.
    """
    if mapping is not None and len(kernels) != 1:
        raise InputError("--mapping describes one kernel: pick it with --kernel NAME")
    arch_obj = architecture(arch)
    facts = []
    for k in kernels:
        values = _values(k, params)
        if mapping is not None:
            mappings = mappings_of(k, mapping, arch_obj)
            kernel = kernel_for(k, mappings)
            m, source = build_model(kernel), "given"
        else:
            chosen = choose(k, arch_obj, values, options=choice, progress=progress, budget=budget)
            kernel, m, mappings, source = chosen.kernel, chosen.model, chosen.mappings, "compile's choice"
        facts.append(_kernel_facts(kernel, m, arch_obj, tuple(mappings), values, source, options))
    return tuple(facts)


def _kernel_facts(kernel: ir.Kernel, m: KernelModel, arch: Architecture, mappings: tuple[Mapping, ...],
                  values: dict[str, int], source: str, options: ReportOptions) -> KernelFacts:
    deps = tuple(dependence_facts(m, d) for d in group(find_dependences(m)))
    mapping = mappings[0] if mappings else None
    verdict = check_mapping(m, mapping, arch=arch, params=values) if mapping is not None else None
    cost, refusal, extents = None, "", {}
    if mapping is not None:
        extents = loop_extents_of(m, mapping, values)
        problems = fit_problems(m, mapping, arch, values)
        if problems:
            refusal = "the mapping does not fit: " + "; ".join(p.describe() for p in problems)
        else:
            cost = _report(m, mapping, arch, values, CostOptions())
    roof, roof_svg = roofline_section(cost, arch)
    picture, pic_svg, pic_refusal, labels = slice_section(m, [f.dependence for f in deps], verdict, values, options)
    code, code_refusal = "", ""
    if verdict is None or verdict.legal:
        code = c_emitter.emit_c(kernel, m, mappings, arch=arch, params=values)
    else:
        code_refusal = "no code: the mapping is illegal, so the tiled code would compute something else"
    return KernelFacts(kernel, arch, dict(values), mapping, source if mapping is not None else "none", extents,
                       loop_classes(m), deps, verdict, cost, refusal, roof, roof_svg, picture, pic_svg, pic_refusal,
                       labels, code, code_refusal)


def report(kernels: Sequence[ir.Kernel], *, arch: ArchArg = "host", mapping: MappingArg | None = None,
           params: MappingT[str, int] | None = None, options: ReportOptions = ReportOptions(),
           choice: ChoiceOptions = ChoiceOptions(), title: str = "polymap report",
           progress: Progress | None = None, budget: Budget | None = None) -> str:
    """One self-contained HTML page (``polymap report``) for ``kernels``.

    Per kernel: dependences, loop classes, the iteration space of ``options.loops``
    (other loops at ``options.fixed``) with its dependences, the legality of the
    mapping (``mapping``, else compile's choice with the ``choice`` options) with
    its witness ringed, the mapping as nested tiles, traffic, energy, the
    roofline and the generated C code (:func:`report_facts`).
    """
    return render(report_facts(kernels, arch=arch, mapping=mapping, params=params, options=options, choice=choice,
                               progress=progress, budget=budget), title=title)


# --------------------------------------------------------------------------- other tools' files


def import_timeloop(problem: str | Path, arch: str | Path, mapping: str | Path | None,
                    out_dir: str | Path) -> Imported:
    """Timeloop v0.4 problem, architecture and mapping files as ``.loop``, ``arch.yaml``, ``mapping.yaml``.

    Returns :class:`~polymap.timeloop.Imported` (the files written, the kernel's
    name, notes on Timeloop levels that became two polymap levels).
    """

    return run_import(problem, arch, mapping, out_dir)


def export_timeloop(kernel: ir.Kernel, mapping: MappingArg, *, arch: ArchArg,
                    params: MappingT[str, int] | None = None) -> str:
    """A mapping as the text of a Timeloop mapping file (``cost --export timeloop``)."""

    mp = mapping_of(kernel, mapping, arch)
    return export_mapping(kernel_for(kernel, (mp,)), mp, param_values(kernel, dict(params or {})))
