"""Compiled kernels against PolyBench's original, from PolyBench's own ``main`` (issue 14).

    python benchmarks/polybench_compare.py [--polybench DIR] [--dataset MINI,LARGE] gramschmidt durbin ...

For each kernel and dataset: ``polymap compile`` of ``examples/polybench/K.loop``
at the dataset's sizes (timed, verification included), then two programs
built in a temporary directory from PolyBench's sources (read from
``--polybench``, never copied into this repository; the temporary copy of the
header prints every digit, ``%0.17g``, instead of two decimals) with
``-DPOLYBENCH_DUMP_ARRAYS``: the original, and the same ``main`` with its
kernel call redirected to the generated C function. Their array dumps are
compared: the largest difference relative to the largest value, per array.
The original is built as PolyBench's README does (``-O3``, no
``-march=native``: no fused multiply-add), the generated file as ``cli.md``
says (``-O3 -march=native -fopenmp``).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def find_source(polybench: Path, kernel: str) -> Path:
    found = [p for p in polybench.rglob(f"{kernel}.c") if p.parent.name == kernel]
    if not found:
        raise SystemExit(f"no {kernel}.c under {polybench}")
    return found[0]


def dataset_sizes(header: Path, dataset: str) -> dict[str, int]:
    text = header.read_text()
    block = text.split(f"ifdef {dataset}_DATASET", 1)[1].split("#  endif", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"#\s*define\s+(\w+)\s+(\d+)", block)}


def parse_dump(text: str) -> dict[str, np.ndarray]:
    out = {}
    for m in re.finditer(r"begin dump: (\w+)(.*?)end   dump: \1", text, re.S):
        out[m.group(1)] = np.array([float(v) for v in m.group(2).split()])
    return out


def build(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}\n{proc.stderr}")


def run_dump(exe: Path) -> dict[str, np.ndarray]:
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=1800)
    return parse_dump(proc.stderr)


def compare_one(kernel: str, dataset: str, polybench: Path, tmp: Path, budget: float = 300.0) -> dict:
    import polymap

    source = find_source(polybench, kernel)
    sizes = dataset_sizes(source.with_suffix(".h"), dataset)
    loop = ROOT / "examples" / "polybench" / f"{kernel}.loop"
    k = polymap.load(loop).kernels[0]
    defines = [x for p in k.param_names for x in ("-D", f"{p}={sizes[p]}")]
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "polymap", "compile", str(loop), *defines, "-o", str(tmp / "out"),
                           "--target", "c,numpy", "--budget", str(budget)], capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        return {"kernel": kernel, "dataset": dataset, "compile_s": seconds, "error": proc.stderr[-800:]}
    util = polybench / "utilities"
    flags = ["-O3", f"-I{util}", f"-D{dataset}_DATASET", "-DPOLYBENCH_DUMP_ARRAYS", "-lm"]
    # temporary copies that print every digit (PolyBench prints two decimals); both programs use them
    header = source.with_suffix(".h")
    (tmp / header.name).write_text(re.sub(r'DATA_PRINTF_MODIFIER "[^"]*"', 'DATA_PRINTF_MODIFIER "%0.17g "',
                                          header.read_text()))
    text = source.read_text()
    (tmp / source.name).write_text(text)
    build(["cc", str(tmp / source.name), str(util / "polybench.c"), "-o", str(tmp / "original"), *flags])
    call = re.search(rf"kernel_{kernel}\s*\(([^;]*)\);", text.split("int main", 1)[1])
    args = [a.strip() for a in call.group(1).split(",")]
    arrays = {re.sub(r"POLYBENCH_ARRAY\((\w+)\)", r"\1", a): a for a in args if "POLYBENCH_ARRAY" in a}
    redirected = text.replace(call.group(0), f"polymap_entry({call.group(1)});")
    tensors = [d.name for d in k.decls if d.role != "local"]
    shim = (f"\nvoid {kernel}({', '.join('double *' for _ in tensors)}{', ' if tensors else ''}"
            f"{', '.join('long' for _ in k.param_names)});\n"
            f"#define polymap_entry(...) {kernel}("
            + ", ".join([f"(double *){arrays[t]}" for t in tensors] + [f"(long){p.lower()}" for p in k.param_names])
            + ")\n")
    wrapper = tmp / f"{kernel}_polymap_main.c"
    wrapper.write_text(redirected.replace("int main", shim + "int main", 1))
    build(["cc", "-O3", "-march=native", "-fopenmp", "-c", str(tmp / "out" / f"{k.name}.c"), "-o", str(tmp / "k.o")])
    build(["cc", str(wrapper), str(util / "polybench.c"), str(tmp / "k.o"), "-o", str(tmp / "ours"), "-fopenmp",
           *flags])
    want, got = run_dump(tmp / "original"), run_dump(tmp / "ours")
    diffs = {}
    for name, w in want.items():
        g = got.get(name)
        scale = float(np.max(np.abs(w))) or 1.0
        diffs[name] = float(np.max(np.abs(g - w)) / scale) if g is not None and g.shape == w.shape else float("nan")
    return {"kernel": kernel, "dataset": dataset, "sizes": {p: sizes[p] for p in k.param_names},
            "compile_s": round(seconds, 1), "relative_difference": diffs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernels", nargs="+")
    p.add_argument("--polybench", default="/work/shared/polybench")
    p.add_argument("--dataset", default="MINI,LARGE")
    p.add_argument("--budget", type=float, default=300.0,
                   help="compile's --budget (default 300 s; raise it on a loaded machine, where wall-clock stretches)")
    args = p.parse_args(argv)
    status = 0
    for kernel in args.kernels:
        for dataset in args.dataset.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                r = compare_one(kernel, dataset, Path(args.polybench), Path(tmp), args.budget)
            print(r, flush=True)
            if "error" in r or any(not (v == v) or v > 0 for v in r["relative_difference"].values()):
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
