"""``polymap compile`` of every PolyBench kernel at PolyBench's LARGE sizes, verification included (issue 14).

    python benchmarks/compile_large.py [--polybench DIR] [--dataset LARGE] [KERNEL ...]

Prints, per kernel, the exit status, the wall-clock seconds and the CPU
seconds of the compile process and its children (a shared machine stretches
wall-clock time; CPU time says what the work costs), and how many size
vectors the verification checked. The sizes come from PolyBench's headers.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from polybench_compare import dataset_sizes, find_source  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernels", nargs="*")
    p.add_argument("--polybench", default="/work/shared/polybench")
    p.add_argument("--dataset", default="LARGE")
    p.add_argument("--budget", type=float, default=300.0,
                   help="compile's --budget (default 300 s; raise it on a loaded machine, where wall-clock stretches)")
    args = p.parse_args(argv)
    loops = sorted((ROOT / "examples" / "polybench").glob("*.loop"))
    if args.kernels:
        loops = [f for f in loops if f.stem in args.kernels]
    worst = 0.0
    for loop in loops:
        name = loop.stem
        sizes = dataset_sizes(find_source(Path(args.polybench), name).with_suffix(".h"),
                              args.dataset)
        with tempfile.TemporaryDirectory() as tmp:
            import polymap

            k = polymap.load(loop).kernels[0]
            defines = [x for q in k.param_names for x in ("-D", f"{q}={sizes[q]}")]
            cpu, start = children_cpu(), time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "polymap", "compile", str(loop), *defines, "-o", tmp,
                                   "--budget", str(args.budget)],
                                  capture_output=True, text=True)
            wall, cpu = time.monotonic() - start, children_cpu() - cpu
            checked = "-"
            doc = Path(tmp) / f"{k.name}.json"
            if doc.exists():
                checked = len(json.loads(doc.read_text()).get("verification", {}).get("sizes_checked", []))
        worst = max(worst, wall)
        tail = "" if proc.returncode == 0 else " " + proc.stderr.strip().splitlines()[-1][:160]
        print(f"{name:16s} exit {proc.returncode}  wall {wall:6.1f} s  cpu {cpu:6.1f} s  sizes checked {checked}{tail}",
              flush=True)
    print(f"slowest wall-clock: {worst:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
