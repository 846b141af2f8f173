"""Where B's blocks are packed: compile's GEMM C, the grouped row blocks before it, and two schedules
derived from those, one run.

    python benchmarks/bench_gemm_panels.py [--sizes 2048] [--dtypes f32 f64] [--threads 2] [--repeat 5]

``compile``: compile's register mapping, the streamed form since session 26 (B's KC x NB block at L2
for all of a core's rows, A read in place; register_mapping.stream_blocks). ``grouped``: the same
blocking with ``stream=False``, the form before it: row blocks of about MC rows, A's block and B's
KC x 128 group packed at L2, so with two or more row blocks per core (f32 2048: 2 x 516 rows per
core; f64 2048: 3 x 342) each core packs all of B once per row block. Issue 10's lead (session 26)
was to pack B once per core instead; the two variants below do that to the grouped C, derived by
text edits (asserted, so a change of the emitted C's shape fails loudly; a size with one row block
per core has nothing to derive). Every version is checked against ``a @ b`` before it is timed:

- ``panel``: BLIS's loop order on each core. The KC step is outside the row blocks (``omp for
  nowait``: a static schedule deals every KC step's row blocks to the same threads, so each block
  of C stays on one core and its updates keep their order); each core keeps a KC x N panel of B
  (f32 2048: 4 MiB) and fills each group of it at its first row block of the KC step, with the
  same copy code; the later row blocks read the panel.
- ``keep``: compile's loop order; each core keeps all of B packed (f32 2048: 16 MiB), filled at its
  first row block, read by the others.

Timing as ``bench_gemm_c.py`` (its ``medians``: versions alternate block by block, steady calls),
once in wall time and once in process CPU time (all threads; with ``OMP_WAIT_POLICY=passive`` a
waiting thread adds none). A benchmark, not a test. Measured in session 26 (RESULTS.md,
"session 26 (gemm15)"): neither variant was faster than ``grouped`` on the Intel host under load
3-5; ``compile`` (streamed) was.
"""
from __future__ import annotations

import os
import sys

_CLEARED = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(v in os.environ for v in _CLEARED):  # before NumPy loads OpenBLAS: this process only
    os.execve(sys.executable, [sys.executable, *sys.argv],
              {k: v for k, v in os.environ.items() if k not in _CLEARED})

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench_gemm_c import GEMM, blas_info, medians  # noqa: E402
from polymap.codegen.build import load_kernel  # noqa: E402
from polymap.codegen.c.emitter import emit_c  # noqa: E402
from polymap.driver import parse  # noqa: E402
from polymap.machine.presets import load_architecture  # noqa: E402
from polymap.passes.search.choice import evaluate_candidate, fit_keeps  # noqa: E402
from polymap.passes.search.register_mapping import (cache_blocking, register_mapping,  # noqa: E402
                                                    register_mappings, register_shape)
from polymap.poly import build_model  # noqa: E402


class Shape(Exception):
    """The emitted C is not of the shape the edits expect (groups of row blocks, one B group pack)."""


def _find(lines: list[str], pattern: str, start: int = 0) -> int:
    for k in range(start, len(lines)):
        if re.search(pattern, lines[k]):
            return k
    raise Shape(f"no line matches {pattern!r}")


def variants(text: str, groups: int, steps: int) -> dict[str, str]:
    """The grouped C (``text``) and the ``panel`` and ``keep`` schedules of the module docstring.

    ``groups``: B's groups per KC step (ceil(N / NB)); ``steps``: KC steps (ceil(K / KC))."""
    lines = text.split("\n")
    if not any(re.match(r"^\s*for \(long i_DRAM ", line) for line in lines):
        raise Shape("one row block per core: B is already packed once per core and KC step")
    par = _find(lines, r"^\s*#pragma omp parallel$")
    dram = par + 1
    if not re.match(r"^\s*for \(long i_DRAM ", lines[dram]):
        raise Shape("the groups of row blocks are not the parallel region's loop")
    share = _find(lines, r"#pragma omp for schedule\(static\)$", dram)
    kloop = _find(lines, r"^\s*for \(long k_LLC ", share)
    alloc = _find(lines, r"polymap_pk_B_k_j = aligned_alloc\(", kloop)
    ctype, size = re.search(r"sizeof\((\w+)\) \* (\d+)", lines[alloc]).groups()
    indent = re.match(r"^\s*", lines[alloc]).group(0)
    copy_end = _find(lines, rf"^{indent}}}$", _find(lines, rf"^{indent}}} else {{$", alloc))
    bfree = _find(lines, r"free\(polymap_pk_B_k_j\);", copy_end)
    afree = _find(lines, r"free\(polymap_pk_A_i_k\);", bfree)
    close_k = afree + 1
    last = max(k for k, line in enumerate(lines) if line == "}")  # the function's end
    close_dram = last - 1
    if lines[close_k].strip() != "}" or lines[close_dram].strip() != "}" or not (alloc < copy_end < bfree):
        raise Shape("unexpected nesting")

    def build(buffer: str, count: int, index: str, order_k_outside: bool, clear_at: int) -> str:
        out = []
        for k, line in enumerate(lines):
            if k == par:
                out += [line, "  {",
                        f"  {ctype} *restrict {buffer} = aligned_alloc(64, (sizeof({ctype}) * {size} * {count} "
                        f"+ 63) / 64 * 64);"]
                if order_k_outside:
                    out += [lines[kloop], "  int polymap_fresh = 1;"]
                else:
                    out += ["  int polymap_fresh = 1;"]
                continue
            if k == share and order_k_outside:
                out.append(line.replace("schedule(static)", "schedule(static) nowait"))
                continue
            if k == kloop and order_k_outside:
                out.append(re.match(r"^\s*", line).group(0) + "{")
                continue
            if k == alloc:
                out += [f"{indent}{ctype} *restrict polymap_pk_B_k_j = {buffer} + ({index}) * {size};",
                        f"{indent}if (polymap_fresh) {{"]
                continue
            if k == copy_end:
                out += [line, f"{indent}}}"]
                continue
            if k == bfree:
                continue
            if k == clear_at:
                out += [line, "polymap_fresh = 0;"] if not order_k_outside else ["polymap_fresh = 0;", line]
                continue
            if k == close_dram:
                out += [line] + (["  }"] if order_k_outside else []) + [f"  free({buffer});", "  }"]
                continue
            out.append(line)
        return "\n".join(out)

    return {"grouped": text,
            "panel": build("polymap_panel", groups, "j_LLC", True, afree),
            "keep": build("polymap_whole", groups * steps, f"k_LLC * {groups} + j_LLC", False, close_k)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[2048])
    ap.add_argument("--dtypes", nargs="*", default=["f32", "f64"])
    ap.add_argument("--threads", default=os.environ.get("OMP_NUM_THREADS", "2"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    arch = load_architecture("host")
    print(f"numpy {np.__version__}: {blas_info()}; OMP_NUM_THREADS={args.threads}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}")
    for dtype in args.dtypes:
        kernel = parse(GEMM % {"t": dtype}, "gemm.loop").kernels[0]
        model = build_model(kernel)
        nt = np.float32 if dtype == "f32" else np.float64
        for n in args.sizes:
            params = {"M": n, "N": n, "K": n}
            best = min((evaluate_candidate(model, src, m, arch, params) for src, m in
                        register_mappings(model, 0, arch, params) if m is not None),
                       key=lambda c: c.key() if c.legal else (float("inf"),) * 2)
            blocking = dataclasses.replace(cache_blocking(arch, dtype, register_shape(arch.vector, dtype)),
                                           stream=False)
            grouped = fit_keeps(model, register_mapping(model, 0, arch, params, blocking=blocking), arch, params)
            l2 = dict(zip(grouped.loops, grouped.levels[-3].tile))
            groups, steps = -(-n // (l2["j"] or n)), -(-n // (l2["k"] or n))
            texts = {"compile": emit_c(kernel, model, (best.mapping,), params=params)}
            try:
                texts.update(variants(emit_c(kernel, model, (grouped,), params=params), groups, steps))
            except Shape as e:
                print(f"{dtype} {n}: no panel or keep variant ({e})")
                texts["grouped"] = emit_c(kernel, model, (grouped,), params=params)
            rng = np.random.default_rng(0)
            a, b = rng.random((n, n)).astype(nt), rng.random((n, n)).astype(nt)
            c = np.zeros((n, n), dtype=nt)
            arrays = {"A": a, "B": b, "C": c}
            fns = {"numpy": lambda: np.matmul(a, b)}
            for name, text in texts.items():
                lib = load_kernel(text, kernel)
                c[...] = 0
                lib.call_here(arrays, params)
                np.testing.assert_allclose(c, a @ b, rtol=1e-3 if dtype == "f32" else 1e-9, err_msg=name)
                fns[name] = lambda lib=lib: lib.call_here(arrays, params)
            flops = 2.0 * n ** 3 / 1e9
            load = os.getloadavg()[0]
            wall, _ = medians(fns, args.repeat)
            cpu, _ = medians(fns, args.repeat, clock=time.process_time)
            streamed = dict(zip(best.mapping.loops, best.mapping.levels[-3].tile))
            print(f"{dtype} {n} (compile: KC {streamed['k']}, NB {streamed['j']}, rows {streamed['i']}; grouped: "
                  f"KC {l2['k']}, NB {l2['j']}, row block {l2['i']}; load {load:.1f} -> "
                  f"{os.getloadavg()[0]:.1f}): GFLOP/s of wall time, then of CPU time")
            for name in fns:
                print(f"  {name:>8}  wall {flops / wall[name]:7.1f} ({wall['numpy'] / wall[name]:.2f}x numpy)   "
                      f"cpu {flops / cpu[name]:7.1f} ({cpu['numpy'] / cpu[name]:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
