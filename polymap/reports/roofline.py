"""``polymap cost --plot``: the mapping on the architecture's roofline, one point per level.

Peak compute is ``compute instances x ops_per_cycle`` statement instances per
cycle; a level with bandwidth ``B`` (elements per cycle) bounds performance
at ``B x intensity`` below its **ridge** ``peak / B`` and at the peak above
it, so each roof is drawn through three points, bending at the ridge::

    toy (peak 16/cycle), DRAM B = 8:  (lo, 8 lo) -> (2, 16) -> (hi, 16)

The mapping sits at (its intensity at that level, instances / cycles). What
is drawn is computed first (:func:`roofline_data`) and drawn after
(:func:`draw_roofline`); the levels are named in the legend, not next to
their points, so that no two labels overlap.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from polymap.machine.arch import Architecture

from polymap.passes.counting.cost_model import CostReport


@dataclass(frozen=True)
class Roof:
    level: str
    bandwidth: float
    ridge: float  # the intensity where the bandwidth roof meets the compute peak
    line: tuple[tuple[float, float], ...]  # the polyline drawn, bending at the ridge


@dataclass(frozen=True)
class RooflineData:
    kernel: str
    arch: str
    bottleneck: str
    peak: float  # statement instances per cycle
    achieved: float
    span: tuple[float, float]  # intensities drawn
    roofs: tuple[Roof, ...]
    points: tuple[tuple[str, float], ...]  # (level, intensity) of the mapping


def roofline_data(report: CostReport, arch: Architecture) -> RooflineData:
    """The roofs (with their ridges) and the mapping's points, in numbers."""
    peak = float(arch.compute.instances * arch.compute.ops_per_cycle)
    achieved = report.counts.instances / report.cycles if report.cycles else 0.0
    intensity = dict(report.intensity)
    points = tuple((spec.name, float(intensity[spec.name])) for spec in arch.levels if intensity.get(spec.name))
    ridges = [peak / spec.bandwidth for spec in arch.levels if spec.bandwidth]
    marks = [v for _, v in points] + ridges + [1.0]
    lo, hi = min(marks) / 10, max(marks) * 10
    roofs = []
    for spec in arch.levels:
        if not spec.bandwidth:
            continue
        ridge = peak / spec.bandwidth
        roofs.append(Roof(spec.name, float(spec.bandwidth), ridge,
                          ((lo, spec.bandwidth * lo), (ridge, peak), (hi, peak))))
    return RooflineData(report.counts.kernel, arch.name, report.bottleneck, peak, achieved, (lo, hi),
                        tuple(roofs), points)


def draw_roofline(data: RooflineData, out: str | IO, *, fmt: str | None = None) -> list[str]:
    """Draw ``data`` to ``out`` (a path: format by suffix; a file object: ``fmt``); returns the legend's labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8))
    try:
        lo, hi = data.span
        ax.plot([lo, hi], [data.peak, data.peak], "k-", lw=1.5, label=f"compute peak ({data.peak:g}/cycle)")
        colours = {}
        for k, roof in enumerate(data.roofs):
            xs, ys = zip(*roof.line)
            line, = ax.plot(xs, ys, "--", color=f"C{k}",
                            label=f"{roof.level} roof ({roof.bandwidth:g} elem/cycle, ridge at {roof.ridge:.3g})")
            ax.plot([roof.ridge], [data.peak], "|", color=line.get_color(), markersize=12)
            colours[roof.level] = line.get_color()
        markers = "osD^v<>P"
        for k, (level, value) in enumerate(data.points):
            ax.plot([value], [data.achieved], markers[k % len(markers)], color=colours.get(level, f"C{k + 5}"),
                    markersize=8, label=f"mapping at {level}: intensity {value:.3g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_xlabel("arithmetic intensity (statement instances per element)")
        ax.set_ylabel("statement instances per cycle")
        ax.set_title(f"{data.kernel} on {data.arch}: {data.achieved:.3g} instances/cycle, "
                     f"bottleneck {data.bottleneck}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles, labels, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        fig.tight_layout()
        # no date and fixed element ids in an SVG: the same input gives the same page
        svg = (fmt or str(out).rpartition(".")[2]) == "svg"
        with matplotlib.rc_context({"svg.hashsalt": "polymap"}):
            fig.savefig(out, dpi=110, bbox_inches="tight", format=fmt, metadata={"Date": None} if svg else None)
        return labels
    finally:
        plt.close(fig)


def plot_roofline(report: CostReport, arch: Architecture, path: str) -> RooflineData:
    """Write the roofline to ``path`` and return what was drawn."""
    data = roofline_data(report, arch)
    draw_roofline(data, path)
    return data
