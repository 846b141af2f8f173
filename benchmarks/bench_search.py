"""The mapspace search at scale, one run (issue 12): rates, an exhaustive ResNet-18 layer, the GEMM
lower bound, and a local Dask cluster.

Run: ``python benchmarks/bench_search.py`` (about ten minutes on 2 cores). It prints

1. mappings evaluated per second per core (one worker) for gemm, conv2d and gemm with its
   initialisation (``examples/gemm.loop``), exact (the fast path, every order of every tile config
   and keep plan, the search's evaluation phase; building the space, legality and the ISL
   confirmation are timed apart);
2. the pruned mapspace of ResNet-18's ``layer3_1_conv1`` (3x3, 256 -> 256 channels, 14 x 14) on
   ``eyeriss`` searched exhaustively on 2 workers: space, pruned by reason, evaluated, best, time;
3. the best GEMM mapping's DRAM traffic against the lower bound on a two-level architecture;
4. the same GEMM search on a local Dask cluster (scheduler and two workers on 127.0.0.1): the same best.

``--plans`` instead: the evaluation rate per spatial plan (CPU time, one process, interleaved
twice), no spatial loop / ``k`` / the halo loops ``p``, ``r``, ``p q``, ``k p`` of conv2d
(examples) and of the ResNet layer, so the cost of multicast across a halo loop is side by side
with the plans that have none (about two minutes); ``--resnet-keep-all``: only part 2 without the
bypass round (every tensor kept at every level), to see the bypass round's share of part 2.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from polymap.driver import load_program, param_values, parse  # noqa: E402
from polymap.machine.arch import architecture_from_dict  # noqa: E402
from polymap.machine.presets import load_architecture  # noqa: E402
from polymap.passes.counting.cost_model import Objective  # noqa: E402
from polymap.passes.counting.fastcount_nest import analyse_nest  # noqa: E402
from polymap.passes.search.executors import DaskExecutor, LocalExecutor  # noqa: E402
from polymap.passes.search.explore import evaluate_item, work_items  # noqa: E402
from polymap.passes.search.lower_bound import level_bounds, level_traffic  # noqa: E402
from polymap.passes.search.mapsearch import SearchOptions, carrying_loops, legal_mask, search_nest  # noqa: E402
from polymap.passes.search.mapspace import SpatialPlan, build_mapspace  # noqa: E402
from polymap.poly import build_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

GEMM = """
kernel gemm(M = {M}, N = {N}, K = {K}) {{
  in A[M, K]
  in B[K, N]
  inout C[M, N]
  for i in 0..M, j in 0..N, k in 0..K {{ C[i, j] += A[i, k] * B[k, j] }}
}}"""

# two levels: DRAM and one buffer of 64 x 64 + 2 x 64 elements (a 64 x 64 block of C and a column
# of A and a row of B); energies make DRAM traffic the objective
TWO_LEVEL = {"name": "two-level", "levels": [
    {"name": "DRAM", "read_energy": 200, "write_energy": 200},
    {"name": "BUF", "capacity": 4224, "read_energy": 1, "write_energy": 1}],
    "compute": {"instances": 1, "energy": 1}}


def _kernel(src: str):
    k = parse(src, "<bench>").kernels[0]
    return k, build_model(k), param_values(k)


def _line(name: str, r) -> str:
    ph = r.phases
    best = r.best
    return (f"{name:<26} space {r.space:.3g}, pruned {sum(r.pruned.values()):.4g}, evaluated {r.evaluated:,} "
            f"({'exhaustive' if r.exhaustive else 'budget'}) in {r.seconds:.1f} s "
            f"[build {ph['build']:.1f}, legality {ph['legality']:.1f}, evaluate {ph['evaluate']:.1f}, "
            f"confirm {ph['confirm']:.1f}]; best energy {best.cost.energy_pj:.6g} pJ, "
            f"{best.cost.cycles:.6g} cycles, confirmed {best.confirmed}")


def rates(budget: int) -> None:
    print("1. evaluation rate, one worker (exact, the search's evaluation phase)")
    eyeriss = load_architecture("eyeriss")
    cases = [("gemm 256^3 on eyeriss", _kernel(GEMM.format(M=256, N=256, K=256))),
             ("conv2d (examples) on eyeriss", None)]
    conv = load_program(ROOT / "examples" / "conv2d.loop").kernels[0]
    cases[1] = (cases[1][0], (conv, build_model(conv), param_values(conv)))
    gemm = load_program(ROOT / "examples" / "gemm.loop").kernels[0]  # init + acc: an initialisation
    cases.append(("gemm with init on eyeriss", (gemm, build_model(gemm), param_values(gemm))))
    for name, (k, m, params) in cases:
        r = search_nest(m, 0, eyeriss, params, options=SearchOptions(max_evaluations=budget),
                        executor=LocalExecutor(1))
        print("  " + _line(name, r))
        print(f"  {'':<26} {r.evaluated / r.phases['evaluate']:,.0f} mappings/s per core "
              f"({r.evaluated / r.seconds:,.0f}/s counting every phase); path {r.path}")
        for note in r.notes:
            if "keep plans" in note:
                print(f"  {'':<26} {note}")


def plan_rates(budget: int) -> None:
    """Mappings per CPU second of one process for single spatial plans at eyeriss's GLB."""
    eyeriss = load_architecture("eyeriss")
    conv = load_program(ROOT / "examples" / "conv2d.loop").kernels[0]
    layer = load_program(ROOT / "examples" / "networks" / "resnet18.loop").kernel("layer3_1_conv1")
    runs = []
    for k in (conv, layer):
        m, params = build_model(k), param_values(k)
        fast = analyse_nest(m, 0, params)
        carrying = carrying_loops(m, 0, fast.loops)
        for names in ((), ("k",), ("p",), ("r",), ("p", "q"), ("k", "p")):
            loops = frozenset(fast.loops.index(x) for x in names)
            plan = SpatialPlan(tuple(loops if lv == 1 else frozenset() for lv in range(len(eyeriss.levels))))
            space = build_mapspace(fast, eyeriss, (plan,), fixed=carrying)
            cache: dict = {}
            groups, masks, legal = [], [], 0
            for g in space.groups:
                if legal >= budget:
                    break
                masks.append(legal_mask(m, space, g, fast, eyeriss, carrying, cache))
                groups.append(g)
                legal += int(masks[-1].sum()) * len(g.tiles)
            items = work_items(groups, masks, space.plans, fast, eyeriss, objective=Objective.ENERGY, keep=20,
                               rows=False, chunk=200_000, budget=budget)
            runs.append((f"{k.name} spatial [{' '.join(names)}]", items))
    for rep in range(2):
        for label, items in runs:
            t0 = time.process_time()
            n = sum(evaluate_item(it).evaluated for it in items)
            dt = time.process_time() - t0
            print(f"  {label:<36} {n:>9,} mappings in {dt:6.2f} s CPU: {n / dt:>9,.0f} /s "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)


def resnet_layer(executor, label: str, bypass: bool = True):
    k = load_program(ROOT / "examples" / "networks" / "resnet18.loop").kernel("layer3_1_conv1")
    m, params = build_model(k), param_values(k)
    r = search_nest(m, 0, load_architecture("eyeriss"), params,
                    options=SearchOptions(max_evaluations=None, bypass=bypass), executor=executor)
    print("  " + _line(f"layer3_1_conv1 ({label})", r))
    print("  pruned: " + ", ".join(f"{why} {n:.4g}" for why, n in r.pruned.items()))
    for note in r.notes:
        print(f"  note: {note}")
    print(f"  best mapping: {r.best.mapping.to_dict()['levels']}")
    return [f.mapping for f in r.found]


def gemm_bound(executor, label: str):
    k, m, params = _kernel(GEMM.format(M=256, N=256, K=4096))
    arch = architecture_from_dict(TWO_LEVEL, source_name="<two-level>")
    r = search_nest(m, 0, arch, params, options=SearchOptions(max_evaluations=None, top=1), executor=executor)
    fast = r.context[0]
    (bound,) = level_bounds(fast, arch)
    assert set(r.best.mapping.levels[1].keep) == {"A", "B", "C"}, "the bound is compared where BUF keeps all"
    traffic = level_traffic(r.best.cost.counts, 1)
    print("  " + _line(f"gemm 256x256x4096 ({label})", r))
    print(f"  DRAM traffic {traffic:,} vs lower bound {bound.traffic:,.0f}: ratio {traffic / bound.traffic:.4f}")
    return r.best.mapping


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=3_000_000, help="evaluations for the rate runs")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--resnet-on-dask", action="store_true", help="also search the ResNet layer on Dask")
    ap.add_argument("--dask-only", action="store_true", help="only parts 3 and 4")
    ap.add_argument("--plans", action="store_true", help="only the rate per spatial plan (halo loops)")
    ap.add_argument("--resnet-keep-all", action="store_true",
                    help="only the ResNet layer, every tensor kept at every level (no bypass round)")
    args = ap.parse_args()
    t = time.monotonic()
    if args.resnet_keep_all:
        print(f"ResNet-18 layer3_1_conv1 on eyeriss, exhaustive, every tensor kept, {args.workers} workers")
        resnet_layer(LocalExecutor(args.workers), f"{args.workers} local workers, keep all", bypass=False)
        print(f"total {time.monotonic() - t:.0f} s")
        return
    if args.plans:
        print("evaluation rate per spatial plan at GLB, one process, CPU time (interleaved twice)")
        plan_rates(min(args.budget, 200_000))
        print(f"total {time.monotonic() - t:.0f} s")
        return
    if not args.dask_only:
        rates(args.budget)
        print(f"2. ResNet-18 layer3_1_conv1 on eyeriss, exhaustive, {args.workers} workers")
        resnet_layer(LocalExecutor(args.workers), f"{args.workers} local workers")
        print("3. GEMM on a two-level architecture (DRAM + 4224 elements) vs the lower bound")
    local = gemm_bound(LocalExecutor(args.workers), f"{args.workers} local workers")
    print("4. the same searches on a local Dask cluster (scheduler + 2 workers on 127.0.0.1)")
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        remote = gemm_bound(DaskExecutor(cluster.scheduler_address), "Dask")
        print(f"  gemm: same best mapping as the local run: {remote == local}")
        if args.resnet_on_dask:
            on_dask = resnet_layer(DaskExecutor(cluster.scheduler_address), "Dask")
            print(f"  layer3_1_conv1: best {on_dask[0].to_dict()['levels']}")
    print(f"total {time.monotonic() - t:.0f} s")


if __name__ == "__main__":
    main()
