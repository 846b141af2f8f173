"""Re-rank the candidates a ``bench_fidelity.py --json`` run measured with this checkout's model.

    python benchmarks/fidelity_rerank.py RUN.json [--kernels conv2d gemm] [--detail]

The measured times stay those of the run; each candidate's mapping is counted and costed again on
``host`` (counts do not depend on the model's execution rules, so only the ranking can move), and
Spearman's rho between the new ranking (cycles, then energy; ties share their mean rank, as
``bench_fidelity``) and the run's wall-clock medians (and thread-CPU medians) is printed next to the
run's own. A change to the model can so be judged on a quiet run's measurements without timing
again (``docs/design.md``, "Vector lanes"). The run's isl candidates without a mapping are skipped;
its architecture is this machine's ``host``, so read it on the machine the run measured.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from polymap.driver import load_program, param_values
from polymap.machine.presets import load_architecture
from polymap.mapping.files import mapping_from_dict
from polymap.passes.search.choice import evaluate_candidate, kernel_to_map
from polymap.passes.search.fidelity import ranks, spearman
from polymap.poly import build_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fidelity import CASES, ROOT  # noqa: E402


def rerank(row: dict, arch, *, detail: bool = False) -> None:
    # the kernel compile maps (loops sharing a name renamed apart: syrk's and 2mm's second nests)
    kernel, _ = kernel_to_map(load_program(ROOT / CASES[row["kernel"]][0]).kernels[0])
    values = param_values(kernel, row["sizes"])
    model = build_model(kernel)
    got = []
    for c in row["detail"]:
        if c["mapping"] is None or c["measured_s"] is None:
            continue
        mapping = mapping_from_dict(c["mapping"], kernel=kernel, arch=arch)
        report = evaluate_candidate(model, c["source"], mapping, arch, values, seconds=300).report
        if report is not None:
            got.append((report, c))
    keys = ranks([(r.cycles, r.energy_pj) for r, _ in got])
    wall = spearman(keys, [c["measured_s"] for _, c in got])
    cpu = spearman(keys, [c["cpu_s"] for _, c in got]) if all(c.get("cpu_s") for _, c in got) else None
    size = ",".join(f"{k}={v}" for k, v in row["sizes"].items())
    print(f"{row['kernel']:8s} {size:28s} n={len(got):2d}  rho {wall:.3f} (thread CPU "
          f"{'-' if cpu is None else f'{cpu:.3f}'}); the run's own {row['before']['spearman']:.3f}")
    if detail:
        for r, c in sorted(got, key=lambda rc: (rc[0].cycles, rc[0].energy_pj)):
            print(f"    {r.seconds * 1e3:9.3f} ms (run: {c['predicted_before_s'] * 1e3:9.3f})  measured "
                  f"{c['measured_s'] * 1e3:8.3f}  {c['source'][:60]:60s} {r.execution.why[:120]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--kernels", nargs="*", default=None)
    ap.add_argument("--detail", action="store_true", help="every candidate: new and old prediction, measured")
    args = ap.parse_args(argv)
    arch = load_architecture("host")
    for row in json.loads(args.run.read_text())["rows"]:
        if "detail" in row and (args.kernels is None or row["kernel"] in args.kernels):
            rerank(row, arch, detail=args.detail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
