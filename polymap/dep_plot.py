"""A teaching picture: a 2-D slice of an iteration space with dependence arrows.

``polymap deps FILE --plot OUT.png --loops i,j --fix t=1`` draws the points
of one statement for two chosen loops (other loops fixed), an arrow from
every source to every sink of a dependence inside the slice, and colours
the arrows whose dependence is carried by one of the two plotted loops.
Parameters take their numeric values (defaults or ``-D``).
"""
from __future__ import annotations

from typing import Mapping

from .errors import InputError
from .islcheck import isl
from .passes.dependences import Dependence
from .poly import KernelModel, fix_params
from .passes.loop_classes import carrying_loops

_LIMIT = 4000  # arrows drawn at most; a slice is meant to be small


def _points(s: isl.Set) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []
    n = s.dim(isl.dim_type.set)
    s.foreach_point(lambda p: out.append(tuple(int(p.get_coordinate_val(isl.dim_type.set, k).to_python())
                                                for k in range(n))))
    return out


def _slice(model: KernelModel, stmt: str, fixed: Mapping[str, int], params) -> isl.Set:
    s = model.statement(stmt)
    dom = fix_params(s.domain, model, params)
    for k, name in enumerate(s.loops):
        if name in fixed:
            dom = dom.fix_val(isl.dim_type.set, k, isl.Val.int_from_si(dom.get_ctx(), fixed[name]))
    return dom


def plot_iteration_space(model: KernelModel, deps: list[Dependence], out: str, *,
                         loops: tuple[str, str] | None = None, fixed: Mapping[str, int] | None = None,
                         statement: str | None = None, params: Mapping[str, int]) -> None:
    """Draw the slice and write it to ``out`` (PNG). Bad choices are an ``InputError``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stmt = statement or max(model.statements, key=lambda s: len(s.loops)).name
    names = {s.name for s in model.statements}
    if stmt not in names:
        raise InputError(f"--statement {stmt}: no statement of that name (statements: {', '.join(sorted(names))})")
    its = model.statement(stmt).loops
    if len(its) < 2:
        raise InputError(f"--plot: statement {stmt} has fewer than two loops")
    x, y = loops or (its[-2], its[-1])
    for name in (x, y):
        if name not in its:
            raise InputError(f"--loops: {stmt} has no loop '{name}' (its loops: {', '.join(its)})")
    fixed = dict(fixed or {})
    for name in its:
        if name not in (x, y) and name not in fixed:
            fixed[name] = 0 if name not in params else params[name]
    kx, ky = its.index(x), its.index(y)
    pts = _points(_slice(model, stmt, fixed, params))
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.scatter([p[kx] for p in pts], [p[ky] for p in pts], s=12, color="black", zorder=3)
    drawn, legend = 0, set()
    for d in deps:
        if d.source != stmt or d.sink != stmt:
            continue
        carriers = carrying_loops(model, d)
        hot = x in carriers or y in carriers
        rel = fix_params(d.relation, model, params)
        src = _slice(model, stmt, fixed, params)
        rel = rel.intersect_domain(src).intersect_range(src)
        colour = {"RAW": "tab:red", "WAR": "tab:blue", "WAW": "tab:green"}[d.kind]
        label = f"{d.kind} {d.tensor}" + (f" (carried by {'/'.join(c for c in carriers if c)})" if hot else "")
        for p in _points(rel.wrap()):
            if drawn >= _LIMIT:
                break
            a, b = p[: len(its)], p[len(its):]
            ax.annotate("", xy=(b[kx], b[ky]), xytext=(a[kx], a[ky]),
                        arrowprops=dict(arrowstyle="->", color=colour, lw=2.0 if hot else 0.8,
                                        alpha=0.9 if hot else 0.4))
            drawn += 1
            if label not in legend:
                ax.plot([], [], color=colour, lw=2.0 if hot else 0.8, label=label)
                legend.add(label)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    rest = ", ".join(f"{k}={v}" for k, v in fixed.items() if k in its)
    ax.set_title(f"{model.kernel.name}: {stmt}({x}, {y})" + (f" at {rest}" if rest else ""))
    if legend:
        ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.savefig(out, dpi=100)
    plt.close(fig)
