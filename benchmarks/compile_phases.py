"""Where ``compile``'s CPU goes, per phase, without a profiler's distortion (issue 14).

    python benchmarks/compile_phases.py [--dataset LARGE] [--polybench DIR] KERNEL [KERNEL ...]
    python benchmarks/compile_phases.py examples/gemm.loop examples/polybench/heat-3d.loop

A KERNEL ending in ``.loop`` is that file compiled at the sizes of its header (compile's default
sizes, issue 9's "a few seconds"); any other is a PolyBench kernel at the dataset's sizes.

Runs :func:`polymap.api.compile` in this process (the CLI's supervising fork
left out) on PolyBench kernels at a dataset's sizes and adds up the CPU
seconds (this process and its children: compile's candidates run in forked
children) spent in each phase: the proposals (register tiles, default,
interchanges, isl's scheduler), each candidate's legality, fit and counts
(one forked child each, named by its source), the search, the ranking at
reduced sizes, the C and NumPy code, and the verification (building the
sources, the reference execution, the runs). The phases are timed by
wrapping the functions ``compile`` calls, so the numbers are CPU time, not
samples; nested phases are marked ``(total)``. Prints, per kernel, the
chosen candidates, the wall and CPU seconds, the machine's load average and
the phases (CPU and wall seconds), largest CPU first.
"""
from __future__ import annotations

import argparse
import collections
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import polymap  # noqa: E402
from polymap import api  # noqa: E402
from polymap import budget as budget_module  # noqa: E402
from polymap.codegen import verify_sizes  # noqa: E402
from polymap.passes.search import choice  # noqa: E402
from polybench_compare import dataset_sizes, find_source  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SECONDS: collections.Counter = collections.Counter()
WALL: collections.Counter = collections.Counter()
CALLS: collections.Counter = collections.Counter()

#: (module, function, phase): what is wrapped
PHASES = [
    (choice, "register_mappings", "proposals: register tiles"),
    (choice, "choose_mapping", "proposals: default"),
    (choice, "interchange_mappings", "proposals: interchanges"),
    (choice, "isl_proposals", "proposals: isl scheduler"),
    (choice, "with_strided", "ranking: strided weights"),
    (choice, "_rank_beyond_budget", "ranking at reduced sizes (total)"),
    (api, "choose", "CHOICE (total)"),
    (api, "numpy_mappings", "codegen: NumPy target's choice"),
    (api, "emit_numpy", "codegen: NumPy"),
    (api.c_emitter, "emit_c", "codegen: C"),
    (api, "verify_written", "VERIFICATION (total)"),
    (verify_sizes, "plan_sizes", "verification: choosing the sizes"),
    (verify_sizes, "runner", "verification: building the sources"),
    (verify_sizes, "random_inputs", "verification: inputs"),
    (verify_sizes, "execute", "verification: reference execution"),
    (verify_sizes, "check_at", "verification: one size vector (total)"),
]


def cpu() -> float:
    """CPU seconds of this process and of its waited-for children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, wall = cpu(), time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            SECONDS[phase] += cpu() - start
            WALL[phase] += time.monotonic() - wall
            CALLS[phase] += 1
    return wrapper


def child_phase(what: str) -> str:
    """A forked piece's phase: the candidate's source without its number, or the piece's kind."""
    if "'" in what:
        return "child: " + what.split("'")[1].split(" #")[0].split(" kc=")[0]
    return "child: " + what.split(" of ")[0]


def install() -> None:
    for module, name, phase in PHASES:
        setattr(module, name, timed(getattr(module, name), phase))
    run = budget_module.Budget.run

    def run_timed(self: budget_module.Budget, fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None,
                  *, limit: float, timed_out: Any, what: str) -> Any:
        return timed(run, child_phase(what))(self, fn, args, kwargs, limit=limit, timed_out=timed_out, what=what)

    budget_module.Budget.run = run_timed
    # pieces run side by side share the children's CPU: timed per batch, not per piece
    budget_module.Budget.run_all = timed(budget_module.Budget.run_all, "children: pieces side by side (total)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernels", nargs="+")
    p.add_argument("--polybench", default="/work/shared/polybench")
    p.add_argument("--dataset", default="LARGE")
    p.add_argument("--budget", type=float, default=5000.0)
    args = p.parse_args(argv)
    install()
    for name in args.kernels:
        SECONDS.clear()
        WALL.clear()
        CALLS.clear()
        if name.endswith(".loop"):
            kernel = polymap.load(name).kernels[0]
            params = polymap.param_values(kernel, {})
        else:
            kernel = polymap.load(ROOT / "examples" / "polybench" / f"{name}.loop").kernels[0]
            sizes = dataset_sizes(find_source(Path(args.polybench), name).with_suffix(".h"), args.dataset)
            params = {q: sizes[q] for q in kernel.param_names}
        wall, start = time.monotonic(), cpu()
        with tempfile.TemporaryDirectory() as tmp:
            result = api.compile(kernel, params=params, out_dir=tmp,
                                 budget=budget_module.Budget(seconds=args.budget))
        wall, spent = time.monotonic() - wall, cpu() - start
        vectors = len(result.verification.results) if result.verification else 0
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print(f"== {name} {params}: wall {wall:.1f} s, cpu {spent:.1f} s, {vectors} size vectors verified, "
              f"load average {load}")
        for n in result.choice.nests if result.choice else ():
            print(f"   nest {n.nest}: {n.chosen.source}" + (f" (stopped: {'; '.join(n.stopped)})" if n.stopped else ""))
        for phase, seconds in SECONDS.most_common():
            print(f"   {phase:44s} {seconds:8.2f} s cpu {WALL[phase]:8.2f} s wall  x{CALLS[phase]}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
