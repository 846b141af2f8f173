"""``--tune K``: the model ranks, the machine decides.

The model's best ``K`` legal, fitting candidates of a nest (of distinct code:
:func:`distinct`; cli.md "Measuring, calibrating and remembering") are built and
timed (:mod:`polymap.codegen.timing`, in a child process per candidate) and
the fastest measured is kept. The other nests keep their mappings while one
nest is tuned, nest after nest. Before -> after, for gemm::

    model ranking                      measured
      1 register tiles  1.6 ms           2 register tiles  3.1 ms
      2 search #1       1.6 ms    ->     1 search #1       2.4 ms   <- chosen
      3 original order  3.2 ms           3 original order  91 ms
    Spearman 0.5, bias 1.9 (median measured / predicted: the model is optimistic)

:func:`tune` takes any candidates (``polymap search --tune`` hands it its
ranked mappings); :func:`tune_choice` tunes every nest of compile's
:class:`~polymap.passes.search.choice.KernelChoice`. A candidate that fails
to build, crashes or times out is dropped with the reason; when none could
be measured the model's pick stays.
"""
from __future__ import annotations

import dataclasses
import heapq
import itertools
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping as MappingT, Sequence

from polymap import ir
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.c.names import canonical_source
from polymap.codegen.timing import (InterleavedPolicy, Measurement, ProcessTimer, SamplingPolicy, Timer, TimingJob,
                                   compare, paired_ratio)
from polymap.mapping.model import Mapping, mapping_loop_extents
from polymap.passes.search.choice import Candidate, KernelChoice, NestChoice, evaluate_candidate
from polymap.passes.search.fidelity import bias, spearman
from polymap.passes.search.variants import neighbours
from polymap.poly import KernelModel
from polymap.machine.arch import Architecture


#: How much faster (median over rounds of tuned / untuned, timed side by side) the tuned kernel must run
#: for the tuned mappings to replace the model's: less is noise on a shared machine (2mm 256^4 at 0.5 ms:
#: per-nest tuning measured its search mappings faster, and the whole kernel ran 1.09x to 1.69x slower
#: than the untuned register tiles in the bench's interleaved timing). docs/design.md, "Confirming a tuning"
CONFIRM_MARGIN = 0.03

#: :func:`widen` walks downhill to a neighbour only when the model predicts it faster than its parent by more
#: than this fraction of cycles: closer is a tie (gemm's register-tile variants: 0.497 ms each; a 1 %
#: difference is below what a shared machine can measure, session 25 treats < 5 % as noise)
WIDEN_TIE = 0.02

#: :func:`widen` counts at most this many neighbours per candidate wanted (once it has them): enough for
#: a few steps downhill from the model's best, bounded where the walk would otherwise search for minutes
WIDEN_EVALUATIONS = 3


@dataclass(frozen=True)
class TuneOptions:
    """What ``--tune K`` measures and how long it may take."""

    k: int = 4  # candidates per nest, the model's best first
    policy: SamplingPolicy = SamplingPolicy()
    candidate_seconds: float = 60.0  # per candidate, building included; then the child is killed
    seed: int = 0  # of the random inputs
    widen_seconds: float = 30.0  # for counting neighbours when compile's choice has fewer than k candidates
    confirm: InterleavedPolicy = InterleavedPolicy()  # the tuned kernel against the untuned, side by side
    margin: float = CONFIRM_MARGIN


@dataclass(frozen=True)
class TuneCandidate:
    """A mapping to measure (None: the nest's original schedule) and the model's seconds for it."""

    source: str
    mapping: Mapping | None
    predicted_s: float | None


@dataclass(frozen=True)
class MeasuredCandidate:
    candidate: TuneCandidate
    rank_model: int  # 1: the model's best
    measurement: Measurement
    rank_measured: int | None  # 1: the fastest; None when it could not be measured
    chosen: bool

    def to_json(self) -> dict:
        c, m = self.candidate, self.measurement
        out = {"source": c.source, "mapping": None if c.mapping is None else c.mapping.to_dict(),
               "predicted_s": c.predicted_s, "measured_s": m.seconds, "rank_model": self.rank_model,
               "rank_measured": self.rank_measured, "chosen": self.chosen}
        if c.mapping is None:
            out["original_schedule"] = True
        if m.samples:
            out["min_s"] = min(m.samples)
        if m.error is not None:
            out["dropped"] = m.error
        return out


@dataclass(frozen=True)
class NestTuning:
    """The measurements of one nest's candidates, in the model's order."""

    nest: int
    candidates: tuple[MeasuredCandidate, ...]
    spearman: float | None  # model rank vs measured seconds, over the measured candidates
    bias: float | None  # median measured / predicted

    @property
    def chosen(self) -> MeasuredCandidate | None:
        return next((c for c in self.candidates if c.chosen), None)

    def to_json(self) -> dict:
        return {"nest": self.nest, "spearman": self.spearman, "bias": self.bias,
                "candidates": [c.to_json() for c in self.candidates]}


@dataclass(frozen=True)
class Confirmation:
    """The whole kernel with the tuned mappings against it with the model's, timed side by side."""

    untuned: Measurement
    tuned: Measurement
    ratio: float | None  # median over rounds of tuned / untuned; None: one of them was not measured
    kept: str  # "tuned" or "untuned"
    margin: float

    def to_json(self) -> dict:
        return {"untuned_s": self.untuned.seconds, "tuned_s": self.tuned.seconds, "ratio": self.ratio,
                "kept": self.kept, "margin": self.margin,
                **({"dropped": self.tuned.error or self.untuned.error} if self.ratio is None else {})}

    def line(self) -> str:
        return confirmation_line(self.to_json())


@dataclass(frozen=True)
class TunedChoice:
    """Compile's choice after measuring, and what was measured."""

    choice: KernelChoice
    tuning: tuple[NestTuning, ...]
    k: int = 0
    confirmation: Confirmation | None = None  # None: the tuning kept the model's mappings (nothing to confirm)


def tune(candidates: Sequence[TuneCandidate], *, kernel: ir.Kernel, model: KernelModel, nest: int, arch: Architecture,
         params: MappingT[str, int], fixed: Sequence[Mapping] = (), options: TuneOptions = TuneOptions(),
         timer: Timer | None = None, progress: Callable[[str], None] | None = None) -> NestTuning:
    """Time ``candidates`` (the model's ranking, best first) of nest ``nest``; the fastest is chosen.

    ``fixed`` are the mappings of the other nests, kept while this one varies.
    ``timer`` defaults to :class:`~polymap.codegen.timing.ProcessTimer`.
    """
    timer = timer if timer is not None else ProcessTimer()
    others = tuple(m for m in fixed if m.nest != nest)
    measured: list[tuple[TuneCandidate, Measurement]] = []
    best: tuple[float, str] | None = None
    for i, cand in enumerate(candidates):
        mappings = tuple(sorted(others + ((cand.mapping,) if cand.mapping is not None else ()), key=lambda m: m.nest))
        job = TimingJob(cand.source, kernel, emit_c(kernel, model, mappings, arch=arch, params=dict(params)),
                        dict(params), options.policy, options.seed, options.candidate_seconds, cand.mapping)
        m = timer(job)
        measured.append((cand, m))
        if m.seconds is not None and (best is None or m.seconds < best[0]):
            best = (m.seconds, cand.source)
        if progress:
            now = f"{_ms(m.seconds)}" if m.seconds is not None else f"dropped: {m.error}"
            so_far = f"; best so far {_ms(best[0])} ({best[1]})" if best else ""
            progress(f"tuning nest {nest}: candidate {i + 1} of {len(candidates)} ({cand.source}): {now}{so_far}")
    return rank_measurements(nest, measured)


def rank_measurements(nest: int, measured: Sequence[tuple[TuneCandidate, Measurement]]) -> NestTuning:
    """Ranks, Spearman's rho and the bias of measurements listed in the model's order."""
    ok = [k for k, (_, m) in enumerate(measured) if m.seconds is not None]
    by_time = sorted(ok, key=lambda k: (measured[k][1].seconds, k))
    rank_of = {k: r + 1 for r, k in enumerate(by_time)}
    rows = tuple(MeasuredCandidate(c, k + 1, m, rank_of.get(k), bool(by_time) and k == by_time[0])
                 for k, (c, m) in enumerate(measured))
    rho = spearman([k + 1 for k in ok], [measured[k][1].seconds for k in ok])
    b = bias([measured[k][0].predicted_s for k in ok], [measured[k][1].seconds for k in ok])
    return NestTuning(nest, rows, rho, b)


def usable_candidates(nc: NestChoice) -> list[Candidate]:
    """The nest's legal, fitting candidates in the model's order (cycles, then energy): counted at the
    given sizes, or chosen by its counts at reduced sizes (``Candidate.ranked_at``: an isl schedule
    beyond the counting budget, checked and ranked there; before, ``--tune`` left it untimed, so
    jacobi-2d's first tuned compile timed nothing)."""
    return [c for c in nc.candidates if c.legal and (c.report is not None or c.mapping is None or c.ranked_at)]


def code_key(model: KernelModel, candidate: Candidate, params: MappingT[str, int]) -> str:
    """The code ``candidate`` prints for its nest, up to comments and loop names
    (:func:`~polymap.codegen.c.names.canonical_source`): two candidates with one key are one code."""
    own = (candidate.mapping,) if candidate.mapping is not None else ()
    return canonical_source(emit_c(model.kernel, model, own, params=dict(params)))


def distinct(model: KernelModel, candidates: Sequence[Candidate], params: MappingT[str, int], *,
             seen: set[str] | None = None, limit: int | None = None) -> list[Candidate]:
    """``candidates`` in their order without those that print the same code as an earlier one (or as
    one in ``seen``, which is extended): mappings that differ only where the code does not (an order
    at a level whose loops walk one tile) are one candidate, measured once. At most ``limit``
    (printing a candidate costs about a second: the rest are not printed)."""
    seen = set() if seen is None else seen
    out: list[Candidate] = []
    for c in candidates:
        if limit is not None and len(out) >= limit:
            break
        key = code_key(model, c, params)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _tied(best: Candidate, other: Candidate) -> bool:
    """The model cannot tell ``other`` from the better-ranked ``best``: both counted, first keys (cycles)
    within :data:`WIDEN_TIE`."""
    return best.report is not None and other.report is not None and \
        other.key()[0] <= best.key()[0] * (1 + WIDEN_TIE)


def tune_choice(choice: KernelChoice, *, arch: Architecture, params: MappingT[str, int], options: TuneOptions = TuneOptions(),
                timer: Timer | None = None, progress: Callable[[str], None] | None = None) -> TunedChoice:
    """Measure the model's best ``options.k`` candidates of distinct code of every nest of ``choice``
    (widened with neighbours, :func:`widen`, where compile's choice has fewer); keep the fastest of each."""
    nests = list(choice.nests)
    tunings = []
    for pos, nc in enumerate(nests):
        pool = distinct(choice.model, usable_candidates(nc), params, limit=options.k)
        if len(pool) < options.k:
            nc = widen(choice.model, nc, arch, params, k=options.k, seconds=options.widen_seconds,
                       progress=progress)
            nests[pos] = nc
            pool = distinct(choice.model, usable_candidates(nc), params, limit=options.k)
        if len(pool) < 2:  # nothing to decide between
            continue
        fixed = tuple(n.chosen.mapping for n in nests if n.chosen.mapping is not None and n.nest != nc.nest)
        cands = [TuneCandidate(c.source, c.mapping, None if c.report is None else c.report.seconds) for c in pool]
        result = tune(cands, kernel=choice.kernel, model=choice.model, nest=nc.nest, arch=arch, params=params,
                      fixed=fixed, options=options, timer=timer, progress=progress)
        tunings.append(result)
        if result.chosen is not None:
            winner = pool[result.chosen.rank_model - 1]
            # replace, not a new NestChoice: the objective, what was stopped or skipped and the
            # scheduler's time stay what the choice reported
            nests[pos] = dataclasses.replace(nc, chosen=winner, candidates=(winner,) + tuple(
                c for c in nc.candidates if c is not winner))
    tuned = dataclasses.replace(choice, nests=tuple(nests))
    if [n.chosen.mapping for n in tuned.nests] == [n.chosen.mapping for n in choice.nests]:
        return TunedChoice(tuned, tuple(tunings), options.k)
    confirmation = confirm(choice, tuned, arch=arch, params=params, options=options,
                           timer=timer if timer is not None else ProcessTimer())
    if progress:
        progress(confirmation.line())
    if confirmation.kept == "tuned":
        return TunedChoice(tuned, tuple(tunings), options.k, confirmation)
    untuned = {n.nest: n.chosen.source for n in choice.nests}
    return TunedChoice(choice, tuple(_chosen_moved(t, untuned[t.nest]) for t in tunings), options.k, confirmation)


def confirm(untuned: KernelChoice, tuned: KernelChoice, *, arch: Architecture, params: MappingT[str, int],
            options: TuneOptions, timer: Timer) -> Confirmation:
    """The whole kernel with ``tuned``'s mappings against it with ``untuned``'s, timed side by side
    (:func:`~polymap.codegen.timing.compare`); the tuned ones are kept only when measurably faster (the
    median of the rounds' ratios at most ``1 - options.margin``), else the model's.

    Each nest was tuned alone, the others fixed, one candidate after another: a combination was never
    timed against the untuned one, and a candidate that won by the load's luck stayed won. Here both
    are timed as the user runs them, back to back, and the untuned pick is the default.
    """
    jobs = [TimingJob(" + ".join(n.chosen.source for n in c.nests), c.kernel,
                      emit_c(c.kernel, c.model, c.mappings, arch=arch, params=dict(params)), dict(params),
                      options.policy, options.seed, options.candidate_seconds, c.mappings)
            for c in (untuned, tuned)]
    before, after = compare(timer, jobs, options.confirm)
    ratio = paired_ratio(after, before)
    # the untuned kernel failing where the tuned one ran (a crash, a hang) is no reason to keep it. Faster by
    # the rounds' ratio, by the best sample of each (a load only adds time: the best is the run the load
    # touched least; at load 7 on 2 cores, one C source timed against itself gave a ratio of 1.21), and by the
    # medians (jacobi-2d at load 14: a rounds' ratio of 0.914 where the medians were 31.5 against 29.2 ms)
    cut = 1 - options.margin
    faster = ratio is not None and ratio <= cut and min(after.samples) <= cut * min(before.samples) and \
        after.seconds <= cut * before.seconds
    kept = "tuned" if faster or (before.seconds is None and after.seconds is not None) else "untuned"
    return Confirmation(before, after, ratio, kept, options.margin)


def _chosen_moved(t: NestTuning, source: str) -> NestTuning:
    """``t`` with ``chosen`` on the candidate named ``source`` (the model's pick, kept by :func:`confirm`)."""
    rows = tuple(dataclasses.replace(c, chosen=c.candidate.source == source) for c in t.candidates)
    return dataclasses.replace(t, candidates=rows)


def widen(model: KernelModel, nc: NestChoice, arch: Architecture, params: MappingT[str, int], *, k: int, seconds: float,
          evaluations: int | None = None, progress: Callable[[str], None] | None = None) -> NestChoice:
    """``nc`` with neighbours (:mod:`polymap.passes.search.variants`), checked and counted, grown
    best-first from the model's best candidates; ranked as compile ranks.

    Every step expands the candidate the model ranks best among those whose neighbours are not all
    counted yet, and leaves it for later as soon as one of its neighbours is predicted faster by more
    than a tie (:data:`WIDEN_TIE`): that one is expanded next, the walk following the model downhill.
    It ends when every candidate of the pool that would be measured (the model's best ``k`` distinct
    codes) has been expanded, after ``seconds``, or
    once ``evaluations`` neighbours (default :data:`WIDEN_EVALUATIONS` x ``k``) were counted with ``k``
    distinct codes there (the walk is a local search: gemm 256^3's search #2 improved ten steps in a
    row, and ``--tune`` wants a pool, not a search). Before, the neighbours of compile's first
    candidates were added in the order generated until ``k`` were there: conv2d's 16 were single steps
    of ``default``, ten of them one code in speed, and the model's best (its q tile doubled, then
    doubled again) never entered the pool. A neighbour that prints the code of a candidate already
    there is not added: it would be measured twice and tie with itself.
    """
    deadline = time.monotonic() + seconds
    evaluations = WIDEN_EVALUATIONS * k if evaluations is None else evaluations
    counted = 0
    seen = {repr(c.mapping.to_dict()) for c in nc.candidates if c.mapping is not None}
    codes: set[str] = set()
    pool = distinct(model, usable_candidates(nc), params, seen=codes)  # all: a neighbour may repeat any
    found: list[Candidate] = []
    # the frontier: (model key, tie-break, candidate, its neighbours not yet generated); not a candidate
    # chosen at reduced sizes: its neighbours would be counted at the given sizes, beyond the budget
    frontier: list[tuple[tuple[float, float], int, Candidate, Iterator[tuple[str, Mapping]] | None]] = []
    unexpanded: set[int] = set()  # ids of the frontier's candidates
    tick = itertools.count()

    def push(c: Candidate, rest: Iterator[tuple[str, Mapping]] | None = None) -> None:
        heapq.heappush(frontier, (c.key(), next(tick), c, rest))
        unexpanded.add(id(c))

    for c in pool:
        if c.mapping is not None and not c.ranked_at and c.report is not None:
            push(c)
    while frontier and time.monotonic() < deadline:
        if len(pool) >= k and (counted >= evaluations or
                               not any(id(c) in unexpanded for c in sorted(pool, key=Candidate.key)[:k])):
            break  # what would be measured is expanded, or enough work
        key, _, parent, rest = heapq.heappop(frontier)
        if rest is None:
            # the parent's own loops: an isl candidate's are its schedule's (s0, s1, ...), not the nest's
            extents = mapping_loop_extents(model.kernel, parent.mapping, dict(params), model=model)
            rest = neighbours(parent.mapping, model.kernel, arch, extents)
        downhill = False
        for label, m in rest:
            if time.monotonic() > deadline or (counted >= evaluations and len(pool) >= k):
                break
            if repr(m.to_dict()) in seen:
                continue
            seen.add(repr(m.to_dict()))
            code = canonical_source(emit_c(model.kernel, model, (m,), params=dict(params)))
            if code in codes:  # printed before counting: a duplicate costs no count
                continue
            cand = evaluate_candidate(model, f"{parent.source} / {label}", m, arch, params,
                                      seconds=max(1.0, deadline - time.monotonic()))
            counted += 1
            if not (cand.legal and cand.report is not None):
                continue
            codes.add(code)
            found.append(cand)
            pool.append(cand)
            push(cand)
            if progress:
                progress(f"tuning nest {nc.nest}: {len(found)} more candidates ({cand.source})")
            if cand.key() < key and not _tied(cand, parent):  # downhill: the better one first, this one later
                downhill = True
                break
        if downhill:
            heapq.heappush(frontier, (key, next(tick), parent, rest))
        else:
            unexpanded.discard(id(parent))
    everyone = list(nc.candidates) + found
    usable = sorted(usable_candidates(NestChoice(nc.nest, nc.chosen, tuple(everyone))), key=Candidate.key)
    rest_ = [c for c in everyone if c not in usable]
    return dataclasses.replace(nc, candidates=tuple(usable + rest_))


def _ms(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def confirmation_line(doc: MappingT[str, Any]) -> str:
    """The human line of a :class:`Confirmation` (from its JSON, which is what compile's result holds)."""
    if doc["ratio"] is None:
        return (f"the tuned kernel against the untuned: not measured ({doc.get('dropped')}); "
                f"kept the {doc['kept']} mappings")
    return (f"the tuned kernel against the untuned, side by side: {_ms(doc['tuned_s'])} vs "
            f"{_ms(doc['untuned_s'])}, ratio over rounds {doc['ratio']:.3f} (the tuned kept when it, the best samples' "
            f"and the medians' are all <= {1 - doc['margin']:.2f}): "
            f"kept the {doc['kept']} mappings")


def tuning_lines(t: NestTuning) -> list[str]:
    """The human report of one nest's tuning: both ranks, predicted and measured seconds."""
    rho = "-" if t.spearman is None else f"{t.spearman:.2f}"
    if t.bias is None:
        b = "-"
    else:
        b = f"{t.bias:.3g} ({'optimistic' if t.bias > 1 else 'pessimistic'}: median measured / predicted)"
    lines = [f"nest {t.nest}: {len(t.candidates)} candidates measured; Spearman {rho}, bias {b}",
             f"    {'model':>5} {'measured':>8}  {'predicted':>10} {'measured':>10}  source"]
    for c in t.candidates:
        mark = "*" if c.chosen else " "
        pred = "-" if c.candidate.predicted_s is None else _ms(c.candidate.predicted_s)
        meas = _ms(c.measurement.seconds) if c.measurement.seconds is not None else "-"
        rank = "-" if c.rank_measured is None else str(c.rank_measured)
        tail = f"  dropped: {c.measurement.error}" if c.measurement.error else ""
        lines.append(f"  {mark} {c.rank_model:>5} {rank:>8}  {pred:>10} {meas:>10}  {c.candidate.source}{tail}")
    return lines
