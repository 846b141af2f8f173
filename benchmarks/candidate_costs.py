"""CPU seconds of each of ``compile``'s own candidates, in process: legality, fit, counts (issue 14).

    python benchmarks/candidate_costs.py KERNEL [--dataset LARGE] [--isl]

For every nest of a PolyBench kernel (``examples/polybench/KERNEL.loop`` at the
sizes of PolyBench's header), the register-tile, default, interchange and
original-order candidates are checked and counted the way ``choice._evaluate``
does, one piece at a time (counts only for legal ones), and each piece's CPU
time is printed, with whether the counts took the fast exact path. ``--isl`` also counts each with the ISL
path alone and says whether the two agree (they must).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import polymap  # noqa: E402
from polybench_compare import dataset_sizes, find_source  # noqa: E402
from polymap.api import architecture  # noqa: E402
from polymap.passes.counting.counting import count_mapping, isl_count_mapping  # noqa: E402
from polymap.passes.counting.fastcount import fast_counts  # noqa: E402
from polymap.passes.counting.fit import fit_problems  # noqa: E402
from polymap.passes.frontend.rename import distinct_loop_names  # noqa: E402
from polymap.passes.legality.legality import check_mapping  # noqa: E402
from polymap.passes.search.choice import original_mapping  # noqa: E402
from polymap.passes.search.default_mapping import choose_mapping  # noqa: E402
from polymap.passes.search.interchange import interchange_mappings  # noqa: E402
from polymap.passes.search.register_mapping import register_mappings  # noqa: E402
from polymap.poly import build_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernel")
    p.add_argument("--dataset", default="LARGE")
    p.add_argument("--polybench", default="/work/shared/polybench")
    p.add_argument("--arch", default="host")
    p.add_argument("--isl", action="store_true", help="also count with the ISL path alone and compare")
    args = p.parse_args(argv)
    kernel = distinct_loop_names(polymap.load(ROOT / "examples" / "polybench" / f"{args.kernel}.loop").kernels[0])
    sizes = dataset_sizes(find_source(Path(args.polybench), args.kernel).with_suffix(".h"), args.dataset)
    params = {q: sizes[q] for q in kernel.param_names}
    arch = architecture(args.arch)
    model = build_model(kernel)
    clock = time.process_time
    for nest in range(len(kernel.nests())):
        proposals = list(register_mappings(model, nest, arch, params))
        proposals.append(("default", choose_mapping(model, nest, arch, params)))
        proposals += list(interchange_mappings(model, nest, arch, params))
        proposals.append(("original order", original_mapping(kernel, nest, arch)))
        for source, m in proposals:
            if m is None:
                continue
            t0 = clock()
            legal = check_mapping(model, m, params=params).legal
            t1 = clock()
            fit_problems(model, m, arch, params)
            t2 = clock()
            line = f"nest {nest} {source:28s} legal {legal!s:5} legality {t1 - t0:6.2f} s  fit {t2 - t1:5.2f} s"
            if not legal:  # compile counts only legal candidates
                print(line, flush=True)
                continue
            fast = fast_counts(model, m, arch, params=params) is not None
            counts = count_mapping(model, m, arch, params=params)
            line += f"  counts {clock() - t2:6.2f} s ({'fast' if fast else 'ISL'})"
            if args.isl:
                t4 = clock()
                same = isl_count_mapping(model, m, arch, params=params) == counts
                line += f"  ISL alone {clock() - t4:6.2f} s, equal {same}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
