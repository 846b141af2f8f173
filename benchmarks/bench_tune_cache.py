"""Is a tuned compile ever slower than the untuned one, and does the cache answer in a tenth of the time?

    python benchmarks/bench_tune_cache.py [--tune 4] [--kernels gemm 2mm ...] [--rounds 9] [--no-verify]

Per example, in a fresh environment: the tuning cache (``XDG_CACHE_HOME``) and
the built libraries (``POLYMAP_CACHE``) in a temporary directory, as for a user
who compiles the kernel for the first time; each step's builds stay for the next,
as they do for that user (``--build-cache DIR`` keeps builds across runs instead:
then the first tuned compile finds its candidates built by an earlier run, which
no first compile of a kernel does, and until session 23 every run did that):

1. ``polymap compile`` untuned (``--no-cache``), wall time;
2. ``polymap compile --tune K``: a miss, tunes and stores; wall time ``first``;
3. ``polymap compile --tune K`` at other sizes in the same shape bucket: a hit
   (its JSON says so), wall time ``second``; the goal is ``second / first < 0.1``;
4. the untuned and the tuned ``NAME.c`` timed interleaved in one child by the protocol compile's own
   confirmation uses (``ProcessTimer.interleaved``: steady-state blocks, rounds forward and backward,
   medians, and the median of the rounds' ratios, "paired"); ``tuned / untuned`` should never exceed 1
   beyond the noise.

A benchmark, not a test (the suite checks both properties deterministically
with injected timers: ``tests/test_tuning.py``).
"""
from __future__ import annotations

import argparse
import compileall
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from polymap.codegen.c.names import canonical_source
from polymap.codegen.timing import InterleavedPolicy, ProcessTimer, TimingJob, paired_ratio, timing_environment
from polymap.driver import load_program, param_values

ROOT = Path(__file__).resolve().parent.parent
#: file, sizes tuned, other sizes in the same power-of-two bucket
CASES = {
    "gemm": ("examples/gemm.loop", {"M": 512, "N": 512, "K": 512}, {"M": 400, "N": 480, "K": 300}),
    "conv2d": ("examples/conv2d.loop", {"C": 32, "K": 32, "P": 28, "Q": 28}, {"C": 30, "K": 20, "P": 27, "Q": 25}),
    "jacobi-2d": ("examples/jacobi2d.loop", {"T": 16, "N": 1024}, {"T": 13, "N": 1000}),
    "2mm": ("examples/2mm.loop", {"NI": 256, "NJ": 256, "NK": 256, "NL": 256},
            {"NI": 200, "NJ": 256, "NK": 250, "NL": 129}),
    "syrk": ("examples/polybench/syrk.loop", {"M": 500, "N": 600}, {"M": 300, "N": 1000}),
}


def compile_once(path: str, sizes: dict, out: Path, env: dict, extra: list[str]) -> tuple[float, dict, float]:
    """Wall seconds, the JSON, and CPU seconds (user + system of the compile and every process it waited
    for: its supervised child, gcc, the timing children), which a loaded machine inflates less than wall."""
    cmd = [sys.executable, "-m", "polymap", "compile", str(ROOT / path), "-o", str(out), "--json", "--budget", "3600"]
    cmd += [a for k, v in sizes.items() for a in ("-D", f"{k}={v}")] + extra
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, env=env, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    for line in proc.stderr.splitlines():  # why a remembered entry was ignored, say
        if line.startswith("warning:"):
            print(f"    {' '.join(f'{k}={v}' for k, v in sizes.items())}: {line}", flush=True)
    return wall, json.loads(proc.stdout), cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune", type=int, default=4)
    ap.add_argument("--kernels", nargs="*", default=list(CASES))
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--no-verify", action="store_true",
                    help="compile with --no-verify (default: verified; a hit is verified too, a reference execution)")
    ap.add_argument("--build-cache", help="a build cache kept across runs (default: a fresh one per example)")
    args = ap.parse_args(argv)
    verify = ["--no-verify"] if args.no_verify else []
    # Python keeps compiled bytecode beside the sources unless PYTHONDONTWRITEBYTECODE is set, as in the
    # sandbox these numbers were first taken in: there every command compiled polymap's ~200 modules from
    # source (0.4 s of a 1.5 s hit, as much of the first compile). Compiled once here, as an install that
    # writes bytecode has them, so that both compiles start as a user's do; a stale file is never used
    # (Python checks each source's time stamp).
    compileall.compile_dir(str(ROOT / "polymap"), quiet=1)
    print(f"polymap's bytecode compiled (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}); "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for name in args.kernels:
        path, sizes, other = CASES[name]
        with tempfile.TemporaryDirectory(prefix="polymap-bench-cache-") as tmp:
            tmp = Path(tmp)
            env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "xdg")}
            env["POLYMAP_CACHE"] = args.build_cache or str(tmp / "builds")
            t_untuned, _, _ = compile_once(path, sizes, tmp / "untuned", env, ["--no-cache", *verify])
            t_first, doc1, c_first = compile_once(path, sizes, tmp / "tuned", env, ["--tune", str(args.tune), *verify])
            t_second, doc2, c_second = compile_once(path, other, tmp / "again", env,
                                                    ["--tune", str(args.tune), *verify])
            kernel = load_program(ROOT / path).kernels[0]
            values = param_values(kernel, sizes)
            jobs = [TimingJob(label, kernel, (tmp / label / f"{kernel.name}.c").read_text(), dict(values))
                    for label in ("untuned", "tuned")]
            jobs = [dataclasses.replace(j, limit_seconds=450.0) for j in jobs]
            # compile's own confirmation protocol (steady-state blocks, side by side, the same environment)
            u, t = ProcessTimer(timing_environment(os.environ)).interleaved(jobs, InterleavedPolicy(rounds=args.rounds))
            paired = paired_ratio(t, u)
            # one code twice (the tuning kept the model's picks): the ratio is the noise of this run
            same = canonical_source(jobs[0].c_source) == canonical_source(jobs[1].c_source)
            if paired is None:
                ratio = f"not timed: {t.error or u.error}"
            else:
                ratio = (f"tuned/untuned {t.seconds / u.seconds:.3f} ({t.seconds * 1e3:.3f} vs {u.seconds * 1e3:.3f} ms; "
                         f"paired {paired:.3f}, best {min(t.samples) / min(u.samples):.3f}"
                         f"{'; the same code: noise' if same else ''})")
            confirmed = [d.get("tuning_confirmed") for d in doc1.get("kernels", [doc1])]
            if any(confirmed):
                print(f"    compile's confirmation: {confirmed}", flush=True)
            cache1 = _cache(doc1)
            cache2 = _cache(doc2)
            picks = ",".join(str(n.get("chosen")) for d in doc1.get("kernels", [doc1])
                             for n in (d.get("choice") or {}).get("nests", []))
            print(f"{name:9s} untuned compile {t_untuned:6.1f} s | tuned {t_first:6.1f} s ({cache1}; {picks}) | "
                  f"same bucket {t_second:6.1f} s ({cache2}), {t_second / t_first:.3f} of the first "
                  f"(CPU {c_second:.2f} / {c_first:.2f} s = {c_second / c_first:.3f}) | {ratio}", flush=True)
    return 0


def _cache(doc) -> str:
    """Each kernel's ``"cache"`` (compile's JSON: ``{"kernels": [{..., "cache": "hit"}]}``)."""
    docs = doc.get("kernels", [doc]) if isinstance(doc, dict) else doc
    return ",".join(str(d.get("cache")) for d in docs if isinstance(d, dict))


if __name__ == "__main__":
    sys.exit(main())
