"""Does a learned re-ranking earn its place? Leave-one-kernel-out on bench_fidelity's measurements.

    python benchmarks/bench_learned.py FIDELITY.json [MORE.json ...]

Each candidate measured by ``bench_fidelity.py --json`` carries features of
its mapping (traffic per instance and level, cycle terms relative to the
largest, utilization, footprints over capacities, the pessimistic bounds of
:mod:`polymap.passes.counting.variance`) and its measured median. A
scikit-learn gradient-boosting regressor learns the model's residual
``log(measured / predicted)`` (centred per nest: only the order within a
nest matters) on every kernel but one; the held-out kernel's candidates are
re-ranked by ``log predicted + residual`` and Spearman's rho against the
measured times is compared with the model's own ranking. The layer would
be kept only if it raised rho on kernels it was not trained on.
"""
from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np
from sklearn.ensemble import GradientBoostingRegressor

from polymap.passes.search.fidelity import spearman


def load(paths: list[Path]) -> list[dict]:
    nests = []
    for p in paths:
        for row in json.loads(p.read_text())["rows"]:
            cands = [d for d in row.get("detail", []) if d.get("measured_s") and d.get("features")]
            if len(cands) >= 3:
                nests.append({"kernel": row["kernel"], "label": f"{row['kernel']} {row['sizes']} nest {row['nest']}",
                              "cands": cands})
    return nests


def matrix(nests: list[dict], names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for n in nests:
        resid = [math.log(c["measured_s"] / c["predicted_before_s"]) for c in n["cands"]]
        mid = statistics.median(resid)
        for c, r in zip(n["cands"], resid):
            xs.append([c["features"].get(f, 0.0) for f in names])
            ys.append(r - mid)
    return np.array(xs), np.array(ys)


def _f(x: float | None) -> str:
    return "    -" if x is None else f"{x:5.2f}"


def main(argv: list[str]) -> int:
    nests = load([Path(a) for a in argv])
    kernels = sorted({n["kernel"] for n in nests})
    names = sorted({f for n in nests for c in n["cands"] for f in c["features"]})
    model_rho, learned_rho, pess_rho = [], [], []
    for held in kernels:
        train = [n for n in nests if n["kernel"] != held]
        test = [n for n in nests if n["kernel"] == held]
        if not train or not test:
            continue
        x, y = matrix(train, names)
        gbm = GradientBoostingRegressor(n_estimators=200, max_depth=3, learning_rate=0.05, subsample=0.8,
                                        random_state=0).fit(x, y)
        for n in test:
            measured = [c["measured_s"] for c in n["cands"]]
            order = list(range(1, len(n["cands"]) + 1))  # the model's ranking (the list is in its order)
            xt = np.array([[c["features"].get(f, 0.0) for f in names] for c in n["cands"]])
            score = [c["features"]["log_predicted"] + r for c, r in zip(n["cands"], gbm.predict(xt))]
            # ties in the model's seconds are broken by its order, as compile does
            learned = [s + 1e-9 * k for k, s in enumerate(score)]
            a, b = spearman(order, measured), spearman(learned, measured)
            # the pessimistic cycles (variance.py) instead of the nominal ones, ties in the model's order
            pess = [c["features"]["log_predicted"] + math.log(c["features"].get("derating", 1.0)) + 1e-9 * k
                    for k, c in enumerate(n["cands"])]
            p = spearman(pess, measured)
            model_rho.append(a)
            learned_rho.append(b)
            pess_rho.append(p)
            print(f"{n['label']:60s} model rho {_f(a)}   pessimistic {_f(p)}   learned {_f(b)}   "
                  f"({len(measured)} candidates)")
    if model_rho:
        def mean(xs):
            xs = [x for x in xs if x is not None]
            return statistics.fmean(xs) if xs else float("nan")

        print(f"mean rho over {len(model_rho)} held-out nests: model {mean(model_rho):.2f}, "
              f"pessimistic {mean(pess_rho):.2f}, learned {mean(learned_rho):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
