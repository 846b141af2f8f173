"""Remembering tuned choices and using them again only after checking them.

:func:`remember` stores a :class:`~polymap.passes.search.tune.TunedChoice`
in the :class:`~polymap.passes.search.cache.TuningCache`; :func:`recall`
turns an entry back into compile's
:class:`~polymap.passes.search.choice.KernelChoice` after re-checking every
mapping at the new sizes, as if a stranger had written it::

    entry (from the file)      ->  mapping_from_dict   (names, tiles, orders; MappingError: ignored)
                                   legal               (exact dependences at these sizes)
                                   fits                (fan-out and capacities at these sizes)
                                   verifies            (C code vs the reference, when asked)
                               ->  KernelChoice with source "cache (search #1)", status "hit"

Anything that fails is a warning and a miss, never an error: the compile
goes on to choose (and tune) as if there were no entry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping as MappingT

from polymap import ir
from polymap.errors import MappingError
from polymap.mapping.files import mapping_from_dict
from polymap.mapping.schedule import schedule_entry
from polymap.mapping.model import LevelMapping, Mapping, mapping_loop_extents, nest_loops, nest_tensors
from polymap.passes.counting.cost_model import evaluate, mapping_execution
from polymap.passes.counting.counting import count_mapping
from polymap.passes.counting.fastcount import in_class
from polymap.passes.counting.fit import footprint_problems, fanout_problems, footprints_and_fast_counts
from polymap.passes.search.cache import CacheKey, TuningCache
from polymap.passes.search.choice import Candidate, KernelChoice, NestChoice, kernel_to_map, original_mapping, reblocked
from polymap.passes.search.isl_schedule import checked_sizes
from polymap.passes.search.tune import TunedChoice
from polymap.poly import build_model
from polymap.codegen.verify import verify as check_against_reference
from polymap.passes.frontend.rename import repeated_loop_names
from polymap.passes.legality.legality import is_legal
from polymap.machine.arch import Architecture
from polymap.poly import KernelModel


class DoesNotFit(ValueError):
    """A remembered mapping that is legal but overflows a level or the fan-out at the new sizes."""


@dataclass(frozen=True)
class Recall:
    status: str  # "hit", "miss" or "off"
    choice: KernelChoice | None = None
    warnings: tuple[str, ...] = ()


def remember(cache: TuningCache, key: CacheKey, tuned: TunedChoice, params: MappingT[str, int]) -> None:
    """Store the tuned mapping of every nest (and the measurements, for later study)."""
    measured = {t.nest: t.chosen for t in tuned.tuning if t.chosen is not None}
    nests = []
    for nc in tuned.choice.nests:
        m = measured.get(nc.nest)
        mp = nc.chosen.mapping
        nests.append({"nest": nc.nest, "source": nc.chosen.source,
                      "mapping": None if mp is None else mp.to_dict(), "exact": None if mp is None else exact_form(mp),
                      "measured_s": None if m is None else m.measurement.seconds})
    entry = {"kernel": tuned.choice.kernel.name, "k": tuned.k, "params": dict(params), "nests": nests,
             "tuning": [t.to_json() for t in tuned.tuning]}
    if tuned.confirmation is not None:  # for later study, as the measurements
        entry["confirmation"] = tuned.confirmation.to_json()
    cache.store(key, entry)


def exact_form(mapping: Mapping) -> dict | None:
    """Every field of a mapping of one nest without wavefronts, tiles left whole as null, and its
    schedule entries as written (their ISL text is made again when read back).

    The mapping-file form (``to_dict``) reads back with inheritance: a loop a
    level leaves out takes the enclosing tile. A mapping built in code may
    mean the whole loop there instead, and generate other code; this form
    reads back to the very mapping that was measured.
    """
    if mapping.nests or any(lm.wavefront for lm in mapping.levels):
        return None
    out = {"kernel": mapping.kernel, "nest": mapping.nest, "loops": list(mapping.loops),
           "levels": [{"level": lm.level, "tile": list(lm.tile), "order": list(lm.order),
                       "spatial": list(lm.spatial), "keep": list(lm.keep)} for lm in mapping.levels]}
    if mapping.schedule:  # register_mapping's folded initialisation (``init: {i: i, j: j, k: 0}``)
        out["schedule"] = [{"statement": e.statement, "loops": list(e.loops), "exprs": list(e.exprs)}
                           for e in mapping.schedule]
    return out


def from_exact_form(data: dict, kernel: ir.Kernel, arch: Architecture, *, model: KernelModel | None = None
                    ) -> Mapping:
    """The mapping of :func:`exact_form`, checked against the kernel and the architecture (ValueError);
    ``model``: the kernel's, if the caller has it (its schedule entries are read against it)."""
    nest = data["nest"]
    loops = tuple(data["loops"])
    if not isinstance(nest, int) or not 0 <= nest < len(kernel.nests()) or data["kernel"] != kernel.name:
        raise ValueError("the mapping names another kernel or nest")
    if sorted(loops) != sorted(nest_loops(kernel, nest)):
        raise ValueError(f"the mapping's loops {', '.join(loops)} are not the nest's")
    if [lv["level"] for lv in data["levels"]] != list(arch.level_names):
        raise ValueError("the mapping's levels are not the architecture's")
    tensors = set(nest_tensors(kernel, nest))
    levels = []
    for lv in data["levels"]:
        if not set(lv["keep"]) <= tensors:
            raise ValueError(f"level {lv['level']} keeps tensors the nest does not use")
        levels.append(LevelMapping(str(lv["level"]), tuple(lv["tile"]), tuple(lv["order"]), tuple(lv["spatial"]),
                                   tuple(lv["keep"])))
    entries = []
    if data.get("schedule") and model is None:
        model = build_model(kernel)
    for e in data.get("schedule", []):
        st = next((s for s in model.nest_statements(nest) if s.name == e["statement"]), None)
        if st is None or not set(e["loops"]) <= set(loops) or len(e["loops"]) != len(e["exprs"]):
            raise ValueError(f"the schedule entry of {e['statement']!r} does not fit the nest")
        entries.append(schedule_entry(model, st.name, tuple(e["loops"]), tuple(e["exprs"])))
    return Mapping(kernel.name, nest, loops, tuple(levels), schedule=tuple(entries))


def recall(cache: TuningCache, key: CacheKey, kernel: ir.Kernel, arch: Architecture, params: MappingT[str, int], *,
           k: int = 0, verify: bool = True, count: bool = True) -> Recall:
    """The remembered choice for ``kernel`` at ``params``, checked (see the module docstring).

    ``k``: an entry tuned over fewer candidates than asked for is a miss. ``count`` false: a mapping that
    passes and lies outside the fast path's class gets no report (legal and fits, decided all the same):
    compile counts it with ISL while it writes the code (``api._start_costs``), on the other core.
    """
    loaded = cache.load(key)
    if loaded.entry is None:
        return Recall("miss", None, loaded.warnings)
    entry = loaded.entry
    where = f"cache entry {cache.path(key)}"
    if not isinstance(entry.get("k"), int) or entry["k"] < k:
        return Recall("miss", None, ())  # tuned over fewer candidates: tune again
    renamed, expanded = kernel_to_map(kernel)  # the kernel choose maps
    model = build_model(renamed)
    nests = []
    try:
        for item in entry.get("nests", []):
            nests.append(_checked_nest(model, item, arch, params, count=count))
    except (MappingError, KeyError, TypeError, ValueError) as exc:
        return Recall("miss", None, (f"{where} ignored: {str(exc).splitlines()[0]}",))
    wanted = {n for n in range(len(renamed.nests())) if nest_loops(renamed, n)}
    if {nc.nest for nc in nests} != wanted:
        return Recall("miss", None, (f"{where} ignored: it does not map the kernel's nests",))
    # the nests were counted here, at these sizes, for this architecture: compile writes those reports
    # (KernelChoice.report_of) instead of counting the same mappings again
    choice = KernelChoice(renamed, model, tuple(nests), tuple(sorted(repeated_loop_names(kernel).items())),
                          counted_at=tuple(sorted(dict(params).items())), counted_for=arch, expanded=expanded)
    if verify:
        result = check_against_reference(renamed, dict(params), targets=("c",), mapping=choice.mappings,
                                         model=model, raise_on_failure=False)
        if not result.passed:
            return Recall("miss", None, (f"{where} ignored: its code differs from the reference",))
    return Recall("hit", choice, ())


def _checked_nest(model: KernelModel, item: dict, arch: Architecture, params: MappingT[str, int], *,
                  count: bool = True) -> NestChoice:
    """One nest of an entry as a NestChoice, or ValueError saying what is wrong with it."""
    nest, source = int(item["nest"]), str(item["source"])
    label = f"cache ({source})"
    if item["mapping"] is None:
        counted = original_mapping(model.kernel, nest, arch)
        cand = Candidate(label, None, counted, True)
        return NestChoice(nest, cand, (cand,))
    if item.get("exact") is not None:
        mapping = from_exact_form(item["exact"], model.kernel, arch, model=model)
    else:
        mapping = mapping_from_dict(item["mapping"], kernel=model.kernel, arch=arch)
    if mapping.nest != nest:
        raise ValueError(f"nest {nest} holds a mapping of nest {mapping.nest}")
    values = dict(params)
    try:
        return _checked_mapping(model, nest, label, mapping, arch, values, count=count)
    except DoesNotFit as exc:
        # blocked for other sizes of the bucket: made again by the rule that made it, checked alike
        again = reblocked(model, nest, source, arch, values)
        if again is None or again == mapping:
            raise
        try:
            return _checked_mapping(model, nest, f"cache ({source}, re-blocked for these sizes)", again, arch, values,
                                    count=count)
        except ValueError:
            raise exc from None


def _checked_mapping(model: KernelModel, nest: int, label: str, mapping: Mapping, arch: Architecture,
                     values: dict[str, int], *, count: bool = True) -> NestChoice:
    """``mapping`` as the nest's choice when it is legal and fits at ``values``, else ValueError saying why;
    with its exact report when ``count``."""
    if not is_legal(model, mapping):
        raise ValueError(f"the mapping of nest {nest} is illegal")
    # a skewed, fused or wavefront mapping whose exact counts are beyond the work budget was checked and
    # ranked at reduced sizes when it was chosen (choice._rank_beyond_budget): re-checked by the same rule.
    # Counted at the given sizes instead, jacobi-2d's 8 x 64 x 64 wavefront tiles were refused at every
    # size of the bucket (L1 49 KB at T=16, N=1024 as at 13 x 1000), so a hit was never possible, and the
    # miss chose again for a minute
    at = checked_sizes(model, nest, mapping, values)
    extents = mapping_loop_extents(model.kernel, mapping, at, model=model)
    if fanout_problems(mapping, arch, extents):
        raise DoesNotFit(f"the mapping of nest {nest} does not fit at these sizes")
    # the capacities on the footprints alone (fit's rule; the fast path's closed forms where it applies,
    # else ISL's): a mapping that does not fit, or one checked at reduced sizes, is never counted whole.
    # syrk's re-blocked hit counted the remembered blocking whole only to find that it overflowed L1
    footprints, fast = footprints_and_fast_counts(model, mapping, at, arch)
    if footprint_problems(footprints, arch):
        raise DoesNotFit(f"the mapping of nest {nest} does not fit at these sizes")
    if at != values:  # counts at other sizes are not these sizes' counts: no report, as when it was chosen
        cand = Candidate(label, mapping, mapping, True, ranked_at=tuple(sorted(at.items())))
        return NestChoice(nest, cand, (cand,))
    if fast is None and not count and not in_class(model, mapping, at):  # ISL counts it whole: seconds
        cand = Candidate(label, mapping, mapping, True, footprints=footprints)
        return NestChoice(nest, cand, (cand,))
    # the report compile writes (KernelChoice.report_of): the fast path's counts that came with the
    # footprints, else counted with those footprints (not counted a second time)
    counts = fast if fast is not None else count_mapping(model, mapping, arch, params=at, footprints=footprints)
    report = evaluate(counts, arch, execution=mapping_execution(model, mapping, arch, extents))
    cand = Candidate(label, mapping, mapping, True, report=report)
    return NestChoice(nest, cand, (cand,))
