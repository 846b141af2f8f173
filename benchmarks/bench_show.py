"""How long ``polymap show --json`` takes on the largest PolyBench kernel.

Largest means most statements, then deepest nest, among
``examples/polybench/*.loop``. One run is parse + semantic and ISL checks
(bounds, uninitialised reads) + model + JSON, as the command does it; the
best of a few runs is printed in seconds. The goal is well under a second.

    python benchmarks/bench_show.py [FILE.loop] [--repeat N]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from polymap.driver import load_program
from polymap.reports.model import kernel_json
from polymap.poly import build_model

ROOT = Path(__file__).resolve().parent.parent


def size(path: Path) -> tuple[int, int]:
    """(statements, deepest nest) over the kernels of ``path``."""
    kernels = load_program(path).kernels
    stmts = [c for k in kernels for c in k.statements()]
    return len(stmts), max((len(c.loops) for c in stmts), default=0)


def largest() -> Path:
    files = sorted((ROOT / "examples" / "polybench").glob("*.loop"))
    if not files:
        raise SystemExit("no examples/polybench/*.loop yet")
    return max(files, key=size)


def show_once(path: Path) -> str:
    """What ``polymap show --json`` computes, without the printing."""
    program = load_program(path)
    kernels = [kernel_json(build_model(k), {p.name: p.default for p in k.params}) for k in program.kernels]
    return json.dumps({"kernels": kernels}, indent=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", help="a .loop file (default: the largest PolyBench kernel)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    path = Path(args.file) if args.file else largest()
    stmts, depth = size(path)
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        show_once(path)
        times.append(time.perf_counter() - start)
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
          f"{stmts} statements, depth {depth}")
    print(f"show --json: {min(times):.3f} s best, {sum(times) / len(times):.3f} s mean "
          f"of {args.repeat} runs")


if __name__ == "__main__":
    main()
