"""How well does the model rank what the machine measures? Before and after ``polymap calibrate``.

    python benchmarks/bench_fidelity.py [--quick] [--top 16] [--kernels gemm conv2d ...] [--json OUT.json] [--twice]
    python benchmarks/bench_fidelity.py --same-code 3 --kernels gemm --sizes 1 [--children 3] [--rounds 45]

For gemm, conv2d, jacobi-2d, 2mm and syrk at two sizes each (``--quick``:
the first size only, fewer rounds): compile's candidates per nest, widened
best-first from the model's best with neighbours (:func:`polymap.passes.search.tune.widen`,
:mod:`polymap.passes.search.variants`) to the model's best
``--top`` of *distinct code*, the pool ``--tune`` measures (cli.md: "the model's best K"; session
25 measured a pool spread over the model's predictions instead, docs/design.md)
(:func:`polymap.passes.search.tune.distinct`:
mappings that print the same C up to loop names are one candidate; before,
9 of conv2d's 16 were one code, timed 0.44-2.1 ms under load and ranked
apart by energy alone). Each is first built and run once in its own child
(:class:`polymap.codegen.timing.ProcessTimer`: a candidate that crashes or
hangs is dropped with the reason); the survivors are then timed
*interleaved* in one child (:meth:`polymap.codegen.timing.ProcessTimer.interleaved`, compile's
confirmation's timing: one source): ``--rounds`` rounds or more (until every median is stable), each
running every candidate once (forward, then backward, so that a drift of the machine's
load falls on all of them alike), and each candidate's median over the
rounds is its time (also kept: the fastest round, what the machine can do
when the other users leave it alone, and the CPU time of the busiest thread of the team
(:func:`polymap.codegen.timing.critical_cpu`), which waiting for the processor does not inflate: read
the CPU rho on a loaded machine, and the wall-clock rho on a quiet one). ``--twice`` times the pool
again in a second child and prints the rho between the two children: what the machine repeats, the
ceiling of any model's rho at that load (a right ranking without noise correlates with one child at
about the square root of that rho, printed beside it). ``--same-code N`` measures the harness instead (A/A: compile's
pick timed N times side by side). Per nest it prints
Spearman's rho between the model's ranking (cycles, then energy; candidates
the model cannot tell apart share their mean rank) and the measured times, the bias (median measured / predicted;
> 1: the model is optimistic) and the regret of the model's pick (its
measured time over the best measured), on the ``host`` preset (before) and
on the architecture ``polymap calibrate`` fits first (after: the same
candidates re-ranked by the calibrated model, their counts unchanged). The
regret of the tuned pick is 1 by construction. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from polymap import api
from polymap.budget import Budget
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.timing import InterleavedPolicy, ProcessTimer, SamplingPolicy, TimingJob, timing_environment
from polymap.driver import load_program, param_values
from polymap.machine.presets import load_architecture
from polymap.mapping.model import mapping_loop_extents
from polymap.passes.counting.cost_model import evaluate
from polymap.passes.counting.execution import BARRIER_CYCLES, FORK_CYCLES
from polymap.passes.counting.variance import variance
from polymap.passes.search.choice import ChoiceOptions, choose, evaluate_candidate
from polymap.passes.search.fidelity import bias, spearman
from polymap.passes.search.fidelity import ranks
from polymap.passes.search.remember import exact_form
from polymap.passes.search.tune import distinct, usable_candidates, widen

ROOT = Path(__file__).resolve().parent.parent
#: two sizes per kernel, where the fastest candidates run about 1 ms and the slowest tens of ms (session 21,
#: quiet: gemm 256^3's 0.35-15 ms, conv2d 16 x 16 x 14 x 14's 0.22-0.66 ms and 2mm 128^4's 0.3-0.4 ms were
#: mostly below that, where the team's start alone is 0.15 ms)
CASES = {
    "gemm": ("examples/gemm.loop", [{"M": 384, "N": 384, "K": 384}, {"M": 512, "N": 512, "K": 512}]),
    "conv2d": ("examples/conv2d.loop", [{"C": 32, "K": 32, "P": 14, "Q": 14},
                                         {"C": 32, "K": 32, "P": 28, "Q": 28}]),
    # compile ranks isl's wavefronts at reduced sizes here (beyond 20,000 instances) and counts nothing
    # at these: counted(), below, counts them exactly (barvinok, 20-50 s each); at T=16, N=1024 (33M
    # instances) that would not finish, so the second size is T=8, N=352 (1.96M)
    "jacobi-2d": ("examples/jacobi2d.loop", [{"T": 8, "N": 256}, {"T": 8, "N": 352}]),
    "2mm": ("examples/2mm.loop", [{"NI": 192, "NJ": 192, "NK": 192, "NL": 192},
                                   {"NI": 256, "NJ": 256, "NK": 256, "NL": 256}]),
    "syrk": ("examples/polybench/syrk.loop", [{"M": 200, "N": 240}, {"M": 500, "N": 600}]),
}
#: the first run of each candidate: does it build, run and finish (one sample, no repeats)
SCREEN = SamplingPolicy(warmup=0, min_repeats=2, max_repeats=2, max_seconds=0.0)
#: screening children at once (each builds its candidate; the machine's two cores)
SCREEN_WORKERS = 2
#: interleaved rounds go on past ``--rounds`` (in forward-backward pairs) until every candidate's median
#: is stable (InterleavedPolicy.stable), at most this many times ``--rounds`` in all
MAX_ROUNDS_FACTOR = 3
#: the interleaved child's sampling time before it stops at the rounds it has (compile's confirmation
#: stops at 20 s; sixteen candidates of tens of ms need minutes for their rounds)
INTERLEAVED_SECONDS = 600.0


def interleaved_policy(rounds: int) -> InterleavedPolicy:
    """The timing of the pool, side by side in one child (:meth:`ProcessTimer.interleaved`, the same
    steady-state blocks and stopping rule as compile's confirmation): ``rounds`` rounds or more."""
    return InterleavedPolicy(rounds=rounds, max_rounds=MAX_ROUNDS_FACTOR * rounds, max_seconds=INTERLEAVED_SECONDS)


def model_keys(cands, arch) -> list[tuple[float, float]]:
    """The model's key of each of ``cands`` on ``arch``: cycles, then energy (compile's)."""
    out = []
    for c in cands:
        r = evaluate(c.report.counts, arch, execution=c.report.execution)
        out.append((r.cycles, r.energy_pj))
    return out


def order_by(cands, arch) -> list[int]:
    """Positions of ``cands`` ranked by the model on ``arch`` (ties: the earlier first)."""
    keys = model_keys(cands, arch)
    return sorted(range(len(cands)), key=lambda k: (keys[k], k))


def features(kernel, c, arch, values) -> dict:
    """What a learned ranking could see of a candidate: traffic per instance and level, cycle terms
    relative to the largest, utilization, the pessimistic bounds, footprints over capacities."""
    r = c.report
    counts = r.counts
    out = {"log_predicted": math.log(max(r.seconds, 1e-12)), "utilization": r.utilization,
           "original": float(c.mapping is None)}
    top = max(v for _, v in r.cycle_terms) or 1.0
    for name, v in r.cycle_terms:
        out[f"term_{name}"] = v / top
    for lv, spec in zip(counts.levels, arch.levels):
        out[f"traffic_{lv.name}"] = math.log1p((lv.reads + lv.updates) / max(counts.instances, 1))
        if lv.footprint_bytes is not None and spec.capacity_bytes:
            out[f"fill_{lv.name}"] = lv.footprint_bytes / spec.capacity_bytes
    mapping = c.mapping if c.mapping is not None else c.counted
    extents = mapping_loop_extents(kernel, mapping, values)  # an isl candidate's loops are its schedule's
    v = variance(kernel, mapping, arch, r.cycle_terms, extents, values)
    for b in v.bounds:
        key = f"bound_{b.kind.replace(' ', '_')}"
        out[key] = max(out.get(key, 1.0), b.factor)
    out["derating"] = v.derating
    ex = r.execution
    out.update({"lanes": ex.lanes, "threads": ex.threads, "waste": ex.waste, "latency": ex.latency})
    return out


def seconds_on(c, arch) -> float:
    return evaluate(c.report.counts, arch, execution=c.report.execution).seconds


def stats(cands, measured: list[float | None], arch, *, fastest: list[float | None] | None = None,
          cpu: list[float | None] | None = None) -> dict:
    """Spearman, bias and the regret of the model's pick on ``arch``, over the measured candidates
    (``fastest``, ``cpu``: Spearman also against the fastest round and the busiest thread's CPU times)."""
    ok = [k for k, m in enumerate(measured) if m is not None]
    keys = model_keys(cands, arch)
    model_rank = ranks([keys[k] for k in ok])  # equal keys (the model cannot tell) share their mean rank
    order = [k for k in order_by(cands, arch) if k in ok]
    best = min(measured[k] for k in ok)
    out = {"spearman": spearman(model_rank, [measured[k] for k in ok]),
           "bias": bias([seconds_on(cands[k], arch) for k in ok], [measured[k] for k in ok]),
           "regret": measured[order[0]] / best, "pick": cands[order[0]].source}
    for name, other in (("spearman_fastest", fastest), ("spearman_cpu", cpu)):
        if other is not None:
            out[name] = spearman(model_rank, [other[k] for k in ok])
    return out


def counted(model, nc, arch, values, *, seconds: float):
    """``nc`` with its legal candidates that compile left uncounted at ``values`` counted exactly there:
    isl's candidates ranked at reduced sizes (their reports dropped), and the original order when it
    won uncounted; the model cannot rank, nor the benchmark measure, a candidate without counts."""
    out = []
    for c in nc.candidates:
        if c.legal and c.report is None:
            again = evaluate_candidate(model, c.source, c.counted, arch, values, seconds=seconds)
            c = dataclasses.replace(again, mapping=c.mapping) if again.report is not None else c
        out.append(c)
    usable = sorted((c for c in out if c.legal and c.report is not None), key=lambda c: c.key())
    return dataclasses.replace(nc, candidates=tuple(usable + [c for c in out if c not in usable]))


def retest(timer, jobs, first, rounds: int) -> dict:
    """The pool timed again in a second child: Spearman's rho between the two children's medians (wall
    clock and busiest thread's CPU), the ceiling of any model's rho on this pool at this load (a rank the
    machine does not repeat cannot be predicted), and each candidate's second time."""
    again = timer.interleaved(jobs, interleaved_policy(rounds))
    ok = [k for k, (a, b) in enumerate(zip(first, again)) if a.seconds is not None and b.seconds is not None]
    if len(ok) < 2:
        return {"note": "fewer than two candidates timed twice"}
    cpu1 = [statistics.median(first[k].cpu_samples) for k in ok]
    cpu2 = [statistics.median(again[k].cpu_samples) for k in ok]
    wall = spearman([first[k].seconds for k in ok], [again[k].seconds for k in ok])
    times = [first[k].seconds for k in ok]
    # two measurements of one pool correlate at r (their reliability); a noiseless, exact ranking would
    # correlate with one of them at about sqrt(r) (classical test theory): what any model can expect
    return {"wall": wall, "ceiling": math.sqrt(max(wall, 0.0)) if wall is not None else None,
            "spread": max(times) / min(times),
            "cpu": spearman(cpu1, cpu2), "load": os.getloadavg()[0],
            "cpu_spread": [max(c) / min(c) for c in (cpu1, cpu2)],
            "second_wall_s": [m.seconds for m in again], "second_cpu_s": [
                statistics.median(m.cpu_samples) if m.cpu_samples else None for m in again]}


def run_case(name: str, path: str, sizes: dict, host, calibrated, top: int, timer, rounds: int,
             budget_s: float, widen_s: float, *, twice: bool = False) -> list[dict]:
    kernel = load_program(ROOT / path).kernels[0]
    values = param_values(kernel, sizes)
    t0 = time.monotonic()
    # every candidate counted, also those whose compute term alone loses: the fidelity is about the ranking
    choice = choose(kernel, host, values, options=ChoiceOptions(search_top=min(top, 8), count_losers=True),
                    budget=Budget(seconds=budget_s))
    phases = {"choice": time.monotonic() - t0}
    out = []
    for nc in choice.nests:
        t1 = time.monotonic()
        nc = counted(choice.model, nc, host, values, seconds=min(budget_s, 300.0))
        t2 = time.monotonic()
        nc = widen(choice.model, nc, host, values, k=top, seconds=widen_s)
        # the model's best ``top`` of distinct code (tune_choice's pool, cli.md's "the model's best K")
        pool = distinct(choice.model, [c for c in usable_candidates(nc) if c.report is not None], values, limit=top)
        t3 = time.monotonic()
        phases.update(counted=t2 - t1, widen=t3 - t2)
        if len(pool) < 2:
            out.append({"kernel": name, "sizes": sizes, "nest": nc.nest, "candidates": len(pool),
                        "note": "fewer than two counted candidates"})
            continue
        fixed = tuple(n.chosen.mapping for n in choice.nests if n.nest != nc.nest and n.chosen.mapping)
        jobs = []
        for c in pool:
            mappings = tuple(sorted(fixed + ((c.mapping,) if c.mapping is not None else ()), key=lambda m: m.nest))
            jobs.append(TimingJob(c.source, choice.kernel, emit_c(choice.kernel, choice.model, mappings, arch=host,
                                                                  params=dict(values)), dict(values), SCREEN))
        errors: list[str | None] = []
        # built and run in a child each: a crash or hang drops only this one. Two at a time: the screen
        # keeps no time (the interleaved child measures), and its cost is the C compiler's (1-2 s a
        # candidate, the build cached for the interleaved child), which the second core halves
        with ThreadPoolExecutor(max_workers=SCREEN_WORKERS) as pool_:
            for i, (job, m) in enumerate(zip(jobs, pool_.map(timer, jobs))):
                errors.append(m.error)
                print(f"    screened {i + 1}/{len(jobs)} {job.source}: "
                      f"{m.error or f'{m.seconds * 1e3:.3f} ms'}", file=sys.stderr, flush=True)
        alive = [k for k, e in enumerate(errors) if e is None]
        t4 = time.monotonic()
        got = timer.interleaved([jobs[k] for k in alive], interleaved_policy(rounds))
        phases.update(screen=t4 - t3, interleaved=time.monotonic() - t4)
        second = retest(timer, [jobs[k] for k in alive], got, rounds) if twice else None
        if second is not None and "cpu" in second:
            print(f"    the pool timed again (load {second['load']:.1f}): rho between the two children "
                  f"{_f(second['wall'])} (wall; a right, noiseless ranking's expected rho {_f(second['ceiling'])}, "
                  f"the pool's spread {second['spread']:.3f}x), {_f(second['cpu'])} (busiest thread's CPU; its spread "
                  f"{second['cpu_spread'][0]:.3f}, {second['cpu_spread'][1]:.3f})", flush=True)
        print("    phases (s): " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()), file=sys.stderr, flush=True)
        measured: list[float | None] = [None] * len(pool)
        fastest: list[float | None] = [None] * len(pool)
        cpu: list[float | None] = [None] * len(pool)
        samples: list[list[float]] = [[] for _ in pool]
        for k, m in zip(alive, got):
            if m.seconds is None:
                errors[k] = m.error
                continue
            samples[k] = list(m.samples)
            measured[k], fastest[k] = m.seconds, min(m.samples)
            cpu[k] = statistics.median(m.cpu_samples)
        if sum(m is not None for m in measured) < 2:
            out.append({"kernel": name, "sizes": sizes, "nest": nc.nest, "candidates": len(pool),
                        "note": "fewer than two measured candidates", "dropped": [e for e in errors if e]})
            continue
        row = {"kernel": name, "sizes": sizes, "nest": nc.nest, "candidates": len(pool),
               "measured": sum(m is not None for m in measured), "best_s": min(m for m in measured if m),
               "before": stats(pool, measured, host, fastest=fastest, cpu=cpu),
               "after": stats(pool, measured, calibrated, fastest=fastest, cpu=cpu),
               "dropped": [e for e in errors if e], "rounds": max(len(s) for s in samples), "retest": second,
               "alive": alive,
               "seconds": round(time.monotonic() - t0, 1), "phases": {k: round(v, 1) for k, v in phases.items()},
               "detail": [{"source": c.source, "predicted_before_s": seconds_on(c, host),
                           "predicted_after_s": seconds_on(c, calibrated), "measured_s": m,
                           "min_s": min(smp) if smp else None, "cpu_s": t, "samples": smp,
                           "execution": c.report.execution.to_json(),
                           "mapping": None if c.mapping is None else c.mapping.to_dict(),
                           "mapping_exact": None if c.mapping is None else exact_form(c.mapping),
                           "features": features(choice.kernel, c, host, values)}
                          for c, m, smp, t in zip(pool, measured, samples, cpu)]}
        out.append(row)
        print(_line(row), flush=True)
    return out


def _f(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _line(r: dict) -> str:
    size = ",".join(f"{k}={v}" for k, v in r["sizes"].items())
    b, a = r["before"], r["after"]
    return (f"{r['kernel']:9s} {size:28s} nest {r['nest']}  n={r['measured']:2d}/{r['candidates']:2d}  "
            f"rho {_f(b['spearman']):>5s} -> {_f(a['spearman']):>5s} (fastest round {_f(b.get('spearman_fastest'))}"
            f" -> {_f(a.get('spearman_fastest'))}, CPU {_f(b.get('spearman_cpu'))} -> {_f(a.get('spearman_cpu'))})   "
            f"bias {b['bias']:8.3g} -> {a['bias']:8.3g} ({_sign(b['bias'])} -> {_sign(a['bias'])})   "
            f"regret {b['regret']:6.2f} -> {a['regret']:6.2f}   best {r['best_s'] * 1e3:8.3f} ms   {r['seconds']:.0f} s")


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _sign(b: float | None) -> str:
    return "-" if b is None else "optimistic" if b > 1 else "pessimistic"


def same_code(name: str, path: str, sizes: dict, copies: int, rounds: int, children: int, budget_s: float) -> None:
    """The harness's own noise (A/A): compile's pick at ``sizes`` timed ``copies`` times side by side in one
    child (:meth:`ProcessTimer.interleaved`, each copy with its own arrays), in ``children`` children.
    Prints, per child, how far apart the copies' medians are (largest over smallest) on the wall clock, at
    their fastest round, and on the busiest thread's CPU time (``Measurement.cpu_samples``)."""
    kernel = load_program(ROOT / path).kernels[0]
    values = param_values(kernel, sizes)
    choice = choose(kernel, load_architecture("host"), values, budget=Budget(seconds=budget_s))
    mappings = tuple(n.chosen.mapping for n in choice.nests if n.chosen.mapping is not None)
    source = emit_c(choice.kernel, choice.model, mappings, params=dict(values))
    job = TimingJob("pick", choice.kernel, source, dict(values))
    spread = lambda v: max(v) / min(v)  # noqa: E731
    for c in range(children):
        got = ProcessTimer().interleaved([job] * copies, interleaved_policy(rounds))
        if any(m.seconds is None for m in got):
            print(f"{name}: not timed ({got[0].error})")
            continue
        wall = [m.seconds for m in got]
        best = [min(m.samples) for m in got]
        cpu = [statistics.median(m.cpu_samples) for m in got]
        print(f"{name:9s} A/A x{copies} child {c + 1}/{children} load {os.getloadavg()[0]:.1f}: wall medians "
              f"{' '.join(f'{w * 1e3:.3f}' for w in wall)} ms (spread {spread(wall):.3f}), fastest rounds "
              f"{spread(best):.3f}, busiest thread's CPU {' '.join(f'{x * 1e3:.3f}' for x in cpu)} ms "
              f"(spread {spread(cpu):.3f})", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=16)
    ap.add_argument("--quick", action="store_true", help="the first size of each kernel, 5 rounds (about a third of the time)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds per candidate (default 45; --quick 9)")
    ap.add_argument("--kernels", nargs="*", default=list(CASES))
    ap.add_argument("--sizes", type=int, nargs="*", default=[0, 1], help="which of the two sizes (0, 1)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--widen", type=float, default=None,
                    help="seconds for counting neighbours per nest (default 60; --quick 30)")
    ap.add_argument("--budget", type=float, default=1800.0, help="seconds for each kernel's choice (a loaded machine needs more than compile's 300)")
    ap.add_argument("--calibrated", type=Path, default=None,
                    help="an architecture polymap calibrate wrote, instead of calibrating first")
    ap.add_argument("--same-code", type=int, default=0, metavar="N",
                    help="instead: the harness's noise, compile's pick timed N times side by side (A/A)")
    ap.add_argument("--twice", action="store_true",
                    help="time each pool in a second child too and print the rho between the two (the noise's ceiling)")
    ap.add_argument("--children", type=int, default=3, help="with --same-code: how many children")
    args = ap.parse_args(argv)
    if args.same_code:
        os.environ.update(timing_environment(os.environ))
        for name in args.kernels:
            path, sizes = CASES[name]
            for s in [sizes[k] for k in args.sizes]:
                same_code(name, path, s, args.same_code, args.rounds or 9, args.children, args.budget)
        return 0
    if args.quick:
        args.sizes = [0]
    # 45: the pools are sub-millisecond codes within a few percent of each other, and rounds are cheap
    # (16 candidates x 45 blocks of >= 2 ms: seconds); at 10 rounds gemm 384's pool repeated its own
    # order at rho 0.24, at 80 at 0.60 (session 29, design.md "Stable medians")
    args.rounds = args.rounds or (9 if args.quick else 45)
    args.widen = args.widen or (30.0 if args.quick else 60.0)
    os.environ.update(timing_environment(os.environ))  # idle OpenMP threads sleep: a shared machine
    host = load_architecture("host")
    t0 = time.monotonic()
    if args.calibrated is not None:
        calibrated, summary = load_architecture(str(args.calibrated)), {"file": str(args.calibrated)}
        print(f"calibrated architecture from {args.calibrated}")
    else:
        cal = api.calibrate(arch=host, progress=lambda s: print("   ", s, file=sys.stderr, flush=True),
                            budget=Budget(seconds=args.budget))
        calibrated = cal.architecture
        if args.json:  # reusable with --calibrated (calibration is the slow part on a loaded machine)
            args.json.with_suffix(".calibrated.yaml").write_text(
                yaml.safe_dump(calibrated.to_dict(), sort_keys=False))
        summary = {"factors": dict(cal.factors), "error": [cal.error_before, cal.error_after],
                   "spearman": [cal.spearman_before, cal.spearman_after], "ridge": cal.ridge,
                   "spearman_within_kernels": [cal.ranking_before, cal.ranking_after], "rates": cal.rates,
                   "held_out_measured_rates": list(cal.held_out_measured),
                   "held_out": list(cal.held_out), "held_out_common_factor": list(cal.held_out_without),
                   # what the machine measured before the fit; host's assumed peak: FMA-pipe lanes x 2 pipes
                   "measured_fma_per_cycle": cal.bandwidths.fma_per_cycle,
                   "assumed_fma_per_cycle": host.compute.instances * host.compute.ops_per_cycle,
                   "measured_bandwidths": dict(cal.bandwidths.per_level),
                   "team_start_cycles": [cal.bandwidths.team_cycles, FORK_CYCLES],  # measured bare, assumed
                   "barrier_cycles": [cal.bandwidths.barrier_cycles, BARRIER_CYCLES],
                   "samples": [{"label": smp.label, "measured_s": smp.measured_s,
                                "predicted_before_s": smp.predicted_before_s, "terms": dict(smp.terms),
                                "team_cycles": smp.fixed} for smp in cal.samples]}
        print(f"measured {cal.bandwidths.fma_per_cycle:.1f} FMA/cycle (host assumes "
              f"{host.compute.instances * host.compute.ops_per_cycle:g}); bandwidths (elements/cycle) "
              + ", ".join(f"{n} {b:.3g}" for n, b in cal.bandwidths.per_level)
              + f"; bare team start {_g(cal.bandwidths.team_cycles)} cycles, barrier {_g(cal.bandwidths.barrier_cycles)}"
                f" (the model assumes {FORK_CYCLES:.3g}, {BARRIER_CYCLES:.3g})")
        print(f"calibration ({time.monotonic() - t0:.0f} s): factors "
              + ", ".join(f"{n} {f:.3g}" for n, f in cal.factors)
              + f"; error {_f(cal.error_before)} -> {_f(cal.error_after)}, "
                f"Spearman {_f(cal.spearman_before)} -> {_f(cal.spearman_after)} over {len(cal.samples)} kernels, "
                f"within a kernel {_f(cal.ranking_before)} -> {_f(cal.ranking_after)}; held out (ridge {cal.ridge}): "
                f"error {_f(cal.held_out[0])}, within {_f(cal.held_out[1])} (common factor {_f(cal.held_out_without[0])}, "
                f"{_f(cal.held_out_without[1])}); the factors derate the {cal.rates} rates "
                f"(held out with the measured ones: error {_f(cal.held_out_measured[0])})")
    rows = []
    timer = ProcessTimer()
    for name in args.kernels:
        path, sizes = CASES[name]
        for s in [sizes[k] for k in args.sizes]:
            rows.extend(run_case(name, path, s, host, calibrated, args.top, timer, args.rounds, args.budget,
                                 args.widen, twice=args.twice))
            if args.json:  # after every case: a long run that stops early keeps what it measured
                args.json.write_text(json.dumps({"calibration": summary, "rows": rows}, indent=1))
    rhos = [r["before"]["spearman"] for r in rows if "before" in r and r["before"]["spearman"] is not None]
    rhos_after = [r["after"]["spearman"] for r in rows if "after" in r and r["after"]["spearman"] is not None]
    if rhos:
        print(f"median rho {statistics.median(rhos):.2f} -> {statistics.median(rhos_after):.2f}; "
              f"total {time.monotonic() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"calibration": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
