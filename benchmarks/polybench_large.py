"""compile's default C against PolyBench's original, both run from PolyBench's own ``main`` (issues 9, 10).

    python benchmarks/polybench_large.py [--kernels gemm trmm ...] [--dataset LARGE] [--threads 2]
                                         [--results FILE.jsonl] [--resume] [--report]

For each kernel (default: all 30 of ``examples/polybench``):

1. ``polymap compile examples/polybench/K.loop -D ...`` at the dataset's sizes (read from
   PolyBench's header), target C, compile's default choice and verification, timed.
2. Two programs built from PolyBench's sources, read from ``--polybench`` (default
   ``/work/shared/polybench``; copied only into a temporary directory, never into this repository),
   both ``cc -O3 -march=native`` with ``-DPOLYBENCH_TIME -DPOLYBENCH_DUMP_ARRAYS`` (the header's
   floating-point dump format patched to print every digit; ``%d`` stays for nussinov's and
   floyd-warshall's ``int`` data): the *original*, sequential as PolyBench ships it,
   and the same ``main`` with its kernel call redirected to the generated function (built with
   ``-fopenmp`` too, run on ``--threads`` threads; PolyBench's utilities, its timer and cache flush,
   built without OpenMP as in the original, so that only the generated code starts a team). The
   time is PolyBench's own timer around the kernel call (cache flushed before it, as PolyBench does).
3. The compiled program's first run dumps its arrays, compared with the dump of a third build:
   the original with ``-ffp-contract=off`` (the compiled program's ``main`` is built so too; its
   kernel is generated C, whose own pragma sets the rounding). Largest difference relative to the
   largest magnitude, per array, ``--tolerance`` (default 1e-6: a register tile's updates are fused
   multiply-adds, one rounding per update fewer). Why not the timed original's dump: GCC contracts
   ``a * b + c`` at ``-O3 -march=native``, and in gramschmidt (M < N: the last columns are
   round-off) that alone changes results by order 1, so the contracted original is not a reference
   (docs/design.md, Robustness: "the PolyBench harness compares uncontracted").
4. Timed runs alternate original and compiled (A, B, A, B, ...) until both medians are stable
   (``--min-runs`` at least, then until adding a run moves neither median by more than
   ``--stable``, at most ``--max-runs``); a kernel whose first run takes longer than
   ``--once-above`` seconds is run once per version, one whose first runs both take less than
   ``--short-below`` seconds (durbin, atax: milliseconds) at least ``--short-runs`` times each.

Each kernel's result is appended as one JSON line to ``--results`` (default
``polybench-large.jsonl`` in the current directory); ``--resume`` skips kernels already there, so a
full run can be done in parts; ``--report`` prints the table from that file without running
anything. The table names the processor, the load average, the per-kernel speedup (original /
compiled), the mapping compile chose per nest, and geometric means over all kernels and over the
issue's 11 (gemm, 2mm, syrk, jacobi-2d, seidel-2d, heat-3d, fdtd-2d, lu, cholesky, trmm, covariance).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from polybench_compare import dataset_sizes, find_source  # noqa: E402

import polymap  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KERNELS = sorted(p.stem for p in (ROOT / "examples" / "polybench").glob("*.loop"))
ELEVEN = ("gemm", "2mm", "syrk", "jacobi-2d", "seidel-2d", "heat-3d", "fdtd-2d", "lu", "cholesky", "trmm",
          "covariance")
C_TYPES = {"f64": "double", "f32": "float", "i32": "int32_t", "i64": "int64_t"}
FLAGS = ("-O3", "-march=native")
UNCONTRACTED = "-ffp-contract=off"
FLOAT_FORMAT = re.compile(r'(define\s+DATA_PRINTF_MODIFIER\s+)"%0\.2l?f "')


def full_precision_header(text: str) -> str:
    """PolyBench's header with its float and double dump formats printing every digit.

    Only ``%0.2f``/``%0.2lf`` change: ``int`` data (nussinov, floyd-warshall) keeps ``%d``, since
    printing an ``int`` with ``%g`` is undefined behaviour (glibc prints whatever an unused
    floating-point register holds: the dumps compared garbage).
    """
    return FLOAT_FORMAT.sub(r'\1"%0.17g "', text)


def processor() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} logical cores"
    return f"unknown processor, {os.cpu_count()} logical cores"


def build(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{proc.stderr[-2000:]}")


def c_function(kernel: str) -> str:
    """PolyBench's name for a kernel's function: ``jacobi-2d`` is ``kernel_jacobi_2d``."""
    return "kernel_" + kernel.replace("-", "_")


def kernel_parameters(text: str, kernel: str) -> list[tuple[str, str, str | None]]:
    """``(name, C element type, element count or None for a scalar)`` of ``kernel_K``'s parameters."""
    sig = re.search(rf"void\s+{re.escape(c_function(kernel))}\s*\((.*?)\)\s*\{{", text, re.S)
    if sig is None:
        raise RuntimeError(f"no {c_function(kernel)} in the PolyBench source")
    out = []
    for part in re.split(r",(?![^()]*\))", sig.group(1)):
        part = " ".join(part.split())
        arr = re.match(r"(\w+)\s+POLYBENCH_(\d)D\((\w+),\s*(.*)\)$", part)
        if arr:
            ndim = int(arr.group(2))
            dims = [d.strip() for d in arr.group(4).split(",")][:ndim]
            out.append((arr.group(3), arr.group(1), "*".join(f"(size_t)({d})" for d in dims)))
        else:
            words = part.split()
            out.append((words[-1], " ".join(words[:-1]), None))
    return out


def redirected_main(text: str, kernel: str, k, tmp: Path) -> str:
    """PolyBench's program with its kernel call sent to the generated function (same arguments).

    ``polymap_entry`` has ``kernel_K``'s parameters; it passes arrays as pointers to their first
    element, scalars by address, sizes as ``long``. An array whose PolyBench element type differs
    from the kernel's dtype (nussinov's ``char`` sequence, an ``i32`` in the .loop) is copied into a
    buffer of the generated type (and back unless it is an input): the copy is inside the timer but
    linear in the array, which is negligible against the kernel.
    """
    params = kernel_parameters(text, kernel)
    by_name = {name: (ctype, count) for name, ctype, count in params}
    dtypes = {d.name: d.dtype for d in k.decls}
    roles = {d.name: d.role for d in k.decls}
    tensors = [d.name for d in k.decls if d.role != "local"]
    proto = ", ".join(f"{C_TYPES[dtypes[t]]} *" for t in tensors) + "".join(", long" for _ in k.param_names)
    sig = re.search(rf"void\s+{re.escape(c_function(kernel))}\s*\((.*?)\)\s*\{{", text, re.S).group(1)
    body, args, after = [], [], []
    for t in tensors:
        ctype, count = by_name[t]
        want = C_TYPES[dtypes[t]]
        if count is None:
            args.append(f"&{t}")
        elif ctype == "DATA_TYPE" or ctype == want:
            args.append(f"({want} *){t}")
        else:
            body.append(f"  {want} *pm_{t} = malloc(({count}) * sizeof({want}));\n"
                        f"  for (size_t q = 0; q < {count}; q++) pm_{t}[q] = (({ctype} *){t})[q];")
            args.append(f"pm_{t}")
            if roles[t] != "in":
                after.append(f"  for (size_t q = 0; q < {count}; q++) (({ctype} *){t})[q] = ({ctype})pm_{t}[q];")
            after.append(f"  free(pm_{t});")
    args += [f"(long){p.lower()}" for p in k.param_names]
    shim = (f"\n#include <stdint.h>\n#include <stdlib.h>\nvoid {k.name}({proto});\n"
            f"static void polymap_entry({sig})\n{{\n" + "\n".join(body)
            + f"\n  {k.name}({', '.join(args)});\n" + "\n".join(after) + "\n}\n")
    call = re.search(rf"{re.escape(c_function(kernel))}\s*\(([^;]*)\);", text.split("int main", 1)[1])
    main_part = text.split("int main", 1)[1].replace(call.group(0), f"polymap_entry({call.group(1)});", 1)
    return text.split("int main", 1)[0] + shim + "int main" + main_part


def run(exe: Path, threads: int, dump: bool) -> tuple[float, dict[str, np.ndarray]]:
    """PolyBench's timer (seconds) of one run, and the dumped arrays when ``dump``."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    err = subprocess.PIPE if dump else subprocess.DEVNULL
    proc = subprocess.run([str(exe)], stdout=subprocess.PIPE, stderr=err, text=True, env=env, timeout=7200)
    if proc.returncode != 0:
        raise RuntimeError(f"{exe.name} exited with {proc.returncode}")
    seconds = float(proc.stdout.split()[-1])
    return seconds, (parse_dump(proc.stderr) if dump else {})


def parse_dump(text: str) -> dict[str, np.ndarray]:
    """PolyBench's array dump (``begin dump: NAME`` ... ``end   dump: NAME``) as flat arrays; NumPy
    converts the numbers (millions at LARGE: a Python loop over them takes minutes on a loaded machine)."""
    out = {}
    at = 0
    while True:
        start = text.find("begin dump: ", at)
        if start < 0:
            return out
        head = start + len("begin dump: ")
        # the name from the end marker: trisolv prints its first value right after "begin dump: x"
        # (no newline), so a word read at the start would be "x0" for x[0] = 0.5
        end = text.find("end   dump: ", head)
        name = re.match(r"\w+", text[end + len("end   dump: "):end + 200]).group(0)
        assert text.startswith(name, head), f"dump of {name} does not begin with its name"
        out[name] = np.array(text[head + len(name):end].split(), dtype=np.float64)
        at = end + 1


def differences(want: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> dict[str, float]:
    out = {}
    for name, w in want.items():
        g = got.get(name)
        scale = float(np.max(np.abs(w))) if w.size else 1.0
        scale = scale or 1.0
        out[name] = (float(np.max(np.abs(g - w))) / scale if g is not None and g.shape == w.shape
                     else float("nan"))
    return out


def one_kernel(kernel: str, args: argparse.Namespace, tmp: Path) -> dict:
    polybench = Path(args.polybench)
    source = find_source(polybench, kernel)
    sizes = dataset_sizes(source.with_suffix(".h"), args.dataset)
    loop = ROOT / "examples" / "polybench" / f"{kernel}.loop"
    k = polymap.load(loop).kernels[0]
    defines = [x for p in k.param_names for x in ("-D", f"{p}={sizes[p]}")]
    result: dict = {"kernel": kernel, "dataset": args.dataset, "sizes": {p: sizes[p] for p in k.param_names}}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "polymap", "compile", str(loop), *defines, "-o", str(tmp / "out"),
                           "--target", "c", "--budget", str(args.budget), "--json", *args.compile_args.split()],
                          capture_output=True, text=True)
    result["compile_s"] = round(time.monotonic() - start, 1)
    if proc.returncode != 0:
        result["error"] = f"compile exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-600:]}"
        return result
    doc = json.loads((tmp / "out" / f"{k.name}.json").read_text())
    result["choice"] = [{"nest": n["nest"], "chosen": n["chosen"], "stopped": n.get("stopped", [])}
                        for n in doc.get("choice", {}).get("nests", [])]
    util = polybench / "utilities"
    header = source.with_suffix(".h")
    (tmp / header.name).write_text(full_precision_header(header.read_text()))
    text = source.read_text()
    (tmp / source.name).write_text(text)
    common = [*FLAGS, f"-I{util}", f"-D{args.dataset}_DATASET", "-DPOLYBENCH_TIME", "-DPOLYBENCH_DUMP_ARRAYS"]
    build(["cc", *common, str(tmp / source.name), str(util / "polybench.c"), "-o", str(tmp / "original"), "-lm"])
    build(["cc", *common, UNCONTRACTED, str(tmp / source.name), str(util / "polybench.c"),
           "-o", str(tmp / "reference"), "-lm"])
    wrapper = tmp / f"{kernel}_polymap_main.c"
    wrapper.write_text(redirected_main(text, kernel, k, tmp))
    build(["cc", *FLAGS, "-fopenmp", "-c", str(tmp / "out" / f"{k.name}.c"), "-o", str(tmp / "k.o")])
    # PolyBench's utilities (timer, cache flush) built as in the original, without OpenMP: built with
    # it, polybench_flush_cache runs an OpenMP loop just before the timer starts, and libgomp's idle
    # worker then spins through the kernel (atax's one-thread code 17 ms against 9.5 ms, load 6)
    build(["cc", *common, UNCONTRACTED, "-c", str(util / "polybench.c"), "-o", str(tmp / "polybench.o")])
    build(["cc", *common, UNCONTRACTED, "-fopenmp", str(wrapper), str(tmp / "polybench.o"), str(tmp / "k.o"),
           "-o", str(tmp / "ours"), "-lm"])
    _, want = run(tmp / "reference", args.threads, dump=True)
    t_orig = run(tmp / "original", args.threads, dump=False)[0]
    t_ours, got = run(tmp / "ours", args.threads, dump=True)
    diffs = differences(want, got)
    result["relative_difference"] = diffs
    result["verified"] = bool(diffs) and all(d <= args.tolerance for d in diffs.values())
    del want, got
    times: dict[str, list[float]] = {"original": [], "polymap": []}
    exes = {"original": tmp / "original", "polymap": tmp / "ours"}
    if max(t_orig, t_ours) <= args.once_above:
        # a kernel of milliseconds: a run on a shared machine is often one time slice off (durbin, 2 ms:
        # 2.0 or 6.1 ms at load 8, the generated and the original code alike), so its median needs
        # more runs than --max-runs allows a long kernel; each costs a fraction of a second
        least, most = args.min_runs, args.max_runs
        if max(t_orig, t_ours) < args.short_below:
            least, most = max(least, args.short_runs), max(most, args.short_runs)
        previous = None
        while True:
            for name in times:
                times[name].append(run(exes[name], args.threads, dump=False)[0])
            medians = {n: statistics.median(v) for n, v in times.items()}
            n = len(times["original"])
            stable = previous is not None and all(abs(medians[x] - previous[x]) <= args.stable * medians[x]
                                                  for x in medians)
            if n >= most or (n >= least and stable):
                break
            previous = medians
    else:  # the dumping runs were the measurements (their timer excludes the dump)
        times = {"original": [t_orig], "polymap": [t_ours]}
    result["times"] = times
    result["original_s"] = statistics.median(times["original"])
    result["polymap_s"] = statistics.median(times["polymap"])
    result["speedup"] = result["original_s"] / result["polymap_s"] if result["polymap_s"] > 0 else float("inf")
    result["load_average"] = round(os.getloadavg()[0], 1)
    return result


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def report(rows: list[dict], out=sys.stdout) -> None:
    print(f"{'kernel':16s} {'original':>9s} {'polymap':>9s} {'speedup':>8s} {'runs':>4s} {'compile':>8s}  "
          f"{'check':5s} {'load':>5s}  mapping per nest", file=out)
    speedups = {}
    for r in sorted(rows, key=lambda r: r["kernel"]):
        if "error" in r:
            print(f"{r['kernel']:16s} failed: {r['error'].splitlines()[-1][:160]}", file=out)
            continue
        what = ", ".join(n["chosen"] for n in r["choice"]) or "original"
        check = "ok" if r["verified"] else "DIFF"
        print(f"{r['kernel']:16s} {r['original_s']:>9.4f} {r['polymap_s']:>9.4f} {r['speedup']:>7.2f}x "
              f"{len(r['times']['original']):>4d} {r['compile_s']:>7.1f}s  {check:5s} {r['load_average']:>5.1f}  {what}",
              file=out)
        if r["verified"]:
            speedups[r["kernel"]] = r["speedup"]
    every = list(speedups.values())
    eleven = [speedups[x] for x in ELEVEN if x in speedups]
    slower = sorted(x for x, s in speedups.items() if s < 0.95)
    print(f"geometric mean {geomean(every):.2f}x over {len(every)} verified kernels; "
          f"{geomean(eleven):.2f}x over {len(eleven)} of the 11 ({', '.join(ELEVEN)}); "
          f"slower than the original by more than 5%: {', '.join(slower) or 'none'}", file=out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", nargs="*", default=None, help="default: all 30")
    p.add_argument("--polybench", default="/work/shared/polybench")
    p.add_argument("--dataset", default="LARGE")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--results", default="polybench-large.jsonl", help="JSON lines, one per kernel (appended)")
    p.add_argument("--resume", action="store_true", help="skip kernels already in --results")
    p.add_argument("--report", action="store_true", help="only print the table of --results")
    p.add_argument("--budget", type=float, default=1800.0, help="compile's --budget (seconds)")
    p.add_argument("--compile-args", default="", help="extra options for compile (default none: its default "
                   "choice), e.g. \"--search-evaluations 0\" while developing")
    p.add_argument("--tolerance", type=float, default=1e-6)
    p.add_argument("--min-runs", type=int, default=3)
    p.add_argument("--max-runs", type=int, default=25)
    p.add_argument("--stable", type=float, default=0.02, help="relative change of a median that counts as stable")
    p.add_argument("--once-above", type=float, default=15.0, help="seconds above which a version runs once")
    p.add_argument("--short-below", type=float, default=0.05,
                   help="seconds below which a kernel (its first runs) is short: at least --short-runs runs")
    p.add_argument("--short-runs", type=int, default=15,
                   help="runs of each version of a short kernel (at least; --max-runs if larger)")
    p.add_argument("--wait-policy", choices=("passive", "active"), default=None,
                   help="OMP_WAIT_POLICY of the runs (default: the environment's, else libgomp's own, which "
                        "spins ~3 ms after each region: on two shared vCPUs a code of several regions then "
                        "waits a scheduler slice per region whenever anything else runs; design.md, session 29)")
    args = p.parse_args(argv)
    if args.wait_policy:
        os.environ["OMP_WAIT_POLICY"] = args.wait_policy  # run() passes os.environ on
    results = Path(args.results)
    done = [json.loads(line) for line in results.read_text().splitlines() if line.strip()] if results.exists() else []
    if not args.report:
        kernels = args.kernels or KERNELS
        unknown = [x for x in kernels if x not in KERNELS]
        if unknown:
            p.error(f"unknown kernels: {', '.join(unknown)}")
        if args.resume:
            kernels = [x for x in kernels if x not in {r["kernel"] for r in done}]
        print(f"{processor()}; OMP_NUM_THREADS={args.threads}; "
              f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(libgomp default)')}; {args.dataset}; load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        start = time.monotonic()
        for kernel in kernels:
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    r = one_kernel(kernel, args, Path(tmp))
                except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as exc:
                    # one kernel must not hide the others: report it and go on
                    r = {"kernel": kernel, "dataset": args.dataset, "error": f"{type(exc).__name__}: {exc}"}
            r["processor"] = processor()
            r["wait_policy"] = os.environ.get("OMP_WAIT_POLICY")
            with results.open("a") as f:
                f.write(json.dumps(r) + "\n")
            done = [d for d in done if d["kernel"] != kernel] + [r]
            short = (f"{r['speedup']:.2f}x ({r['original_s']:.4f} s / {r['polymap_s']:.4f} s), "
                     f"{'verified' if r['verified'] else 'DIFFERENT ' + str(r['relative_difference'])}"
                     if "error" not in r else r["error"][-300:])
            print(f"{kernel}: {short}", flush=True)
        print(f"total {time.monotonic() - start:.0f} s; load average {os.getloadavg()[0]:.1f}")
    latest = {}
    for r in done:
        latest[r["kernel"]] = r
    print(f"{processor()}; {args.dataset}")
    report(list(latest.values()))
    return 0 if all("error" not in r and r.get("verified") for r in latest.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
