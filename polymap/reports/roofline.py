"""``polymap cost --plot``: the mapping on the architecture's roofline, one point per level.

Peak compute is ``compute instances x ops_per_cycle`` statement instances per
cycle; a level with bandwidth ``B`` (elements per cycle) bounds performance
at ``B x intensity``. Each level with a bandwidth draws its roof; the mapping
sits at (its intensity at that level, instances / cycles).
"""
from __future__ import annotations

from polymap.passes.counting.cost_model import CostReport


def plot_roofline(report: CostReport, arch, path: str) -> None:
    """Write a PNG roofline (matplotlib, Agg backend) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peak = arch.compute.instances * arch.compute.ops_per_cycle
    achieved = report.counts.instances / report.cycles if report.cycles else 0.0
    values = [v for _, v in report.intensity if v]
    lo = min(values + [1.0]) / 10
    hi = max(values + [peak]) * 10
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [lo, hi]
    ax.plot(xs, [peak, peak], "k-", label=f"compute peak ({peak:g}/cycle)")
    intensity = dict(report.intensity)
    for k, spec in enumerate(arch.levels):
        value = intensity.get(spec.name)
        if spec.bandwidth is not None:
            ridge = [min(spec.bandwidth * x, peak) for x in xs]
            line, = ax.plot(xs, ridge, "--", label=f"{spec.name} roof ({spec.bandwidth:g} elem/cycle)")
            color = line.get_color()
        else:
            color = f"C{k}"
        if value:
            ax.plot([value], [achieved], "o", color=color)
            ax.annotate(spec.name, (value, achieved), textcoords="offset points", xytext=(5, 5))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (statement instances per element)")
    ax.set_ylabel("statement instances per cycle")
    ax.set_title(f"{report.counts.kernel} on {arch.name}: bottleneck {report.bottleneck}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
