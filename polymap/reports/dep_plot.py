"""A teaching picture: a 2-D slice of an iteration space with dependence arrows.

``polymap deps FILE --plot OUT.png --loops i,j --fix t=1`` draws the points
of one statement for two chosen loops (other loops fixed), an arrow from
every source to every sink of a dependence inside the slice, and colours
the arrows whose dependence is carried by one of the two plotted loops.
Parameters take their numeric values (defaults or ``-D``).
"""
from __future__ import annotations

from pathlib import PurePath
from typing import Mapping

from polymap.errors import InputError
from polymap.islcheck import isl
from polymap.passes.dependences.dependences import Dependence
from polymap.poly import KernelModel, count, fix_params, to_int
from polymap.passes.dependences.loop_classes import carrying_loops

_LIMIT = 4000  # arrows drawn at most; a slice is meant to be small
_MAX_POINTS = 10_000  # instances in a slice (100 x 100): more is no picture, only a long wait


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
            # From text: a --fix value may not fit the C long of int_from_si.
            dom = dom.fix_val(isl.dim_type.set, k, isl.Val(str(fixed[name]), dom.get_ctx()))
    return dom


def _fixed_loops(model: KernelModel, stmt: str, plotted: tuple[str, str], given: Mapping[str, int],
                 params: Mapping[str, int]) -> dict[str, int]:
    """``--fix`` values, checked, plus the first instance's value for every other unplotted loop.

    The first instance (lexicographic minimum) rather than 0: ``for i in 1..N``
    has no instance at ``i = 0``, and an empty picture explains nothing.
    """
    its = model.statement(stmt).loops
    for name in given:
        if name not in its:
            raise InputError(f"--fix {name}: {stmt} has no loop '{name}' (its loops: {', '.join(its)})")
        if name in plotted:
            raise InputError(f"--fix {name}: '{name}' is a plotted loop; fix only the others")
    dom = _slice(model, stmt, given, params)
    if dom.is_empty():
        shown = ", ".join(f"{k}={v}" for k, v in given.items())
        raise InputError(f"--fix {shown}: {stmt} has no instance there "
                         f"(with {', '.join(f'{k}={v}' for k, v in params.items()) or 'no parameters'})")
    first = dom.lexmin().sample_point()
    fixed = dict(given)
    for k, name in enumerate(its):
        if name not in plotted and name not in fixed:
            fixed[name] = int(first.get_coordinate_val(isl.dim_type.set, k).to_python())
    return fixed


def _figure_format(out: str) -> str:
    """The format named by ``out``'s suffix; PNG without one (matplotlib would append '.png')."""
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = PurePath(out).suffix[1:].lower()
    if not suffix:
        return "png"
    known = FigureCanvasBase.get_supported_filetypes()
    if suffix not in known:
        raise InputError(f"--plot {out}: cannot draw a '.{suffix}' file (formats: {', '.join(sorted(known))})")
    return suffix


def plot_iteration_space(model: KernelModel, deps: list[Dependence], out: str, *,
                         loops: tuple[str, str] | None = None, fixed: Mapping[str, int] | None = None,
                         statement: str | None = None, params: Mapping[str, int]) -> None:
    """Draw the slice and write it to ``out`` (PNG). Bad choices are an ``InputError``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fmt = _figure_format(out)
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
    if x == y:
        raise InputError(f"--loops {x},{y}: name two different loops")
    fixed = _fixed_loops(model, stmt, (x, y), fixed or {}, params)
    kx, ky = its.index(x), its.index(y)
    plane = _slice(model, stmt, fixed, params)
    size = to_int(count(plane), params)
    if size > _MAX_POINTS:
        raise InputError(f"--plot: the slice {stmt}({x}, {y}) holds {size} instances (at most {_MAX_POINTS} "
                         f"can be drawn); choose smaller sizes with -D")
    pts = _points(plane)
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.scatter([p[kx] for p in pts], [p[ky] for p in pts], s=12, color="black", zorder=3)
    drawn, legend = 0, set()
    for d in deps:
        if d.source != stmt or d.sink != stmt:
            continue
        carriers = carrying_loops(model, d)
        hot = x in carriers or y in carriers
        rel = fix_params(d.relation, model, params)
        rel = rel.intersect_domain(plane).intersect_range(plane)
        if to_int(count(rel), params) > _LIMIT:
            rel = rel.lexmin()  # one arrow per source instance (to its first sink) keeps enumeration bounded
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
    try:
        fig.savefig(out, dpi=100, format=fmt)
    finally:
        plt.close(fig)
