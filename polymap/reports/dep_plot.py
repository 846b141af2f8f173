"""A teaching picture: a 2-D slice of an iteration space with dependence arrows.

``polymap deps FILE --plot OUT.png --loops i,j --fix t=1`` draws, for two
chosen loops (every other loop fixed), the instances of the chosen statement
and of every other statement that has both loops, and one arrow from source
to sink for every dependence pair inside the slice. What is drawn is computed
first (:func:`slice_picture`, a :class:`SlicePicture` that tests read) and
then drawn (:func:`draw`)::

    seidel2d, N=100: relax(i, j) at t=0, window i in 1..12, j in 1..12 of 1..98
      RAW A  solid red, straight       WAR A  dashed blue, bent left
      WAW A  dotted green, bent right  (thick: carried by i or j)

A slice wider than ``window`` points in a plotted loop is cut to its first
``window`` values and the picture says so; at most ``limit`` arrows are drawn
and the picture says when it stopped. Statements other than the chosen one
are drawn slightly offset, with their own markers, so that arrows between
two statements at the same ``(x, y)`` show. Parameters take their numeric
values (defaults or ``-D``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import IO, Mapping

from polymap.errors import InputError
from polymap.islcheck import isl
from polymap.passes.dependences.dependences import Dependence
from polymap.passes.dependences.loop_classes import carrying_loops
from polymap.poly import KernelModel, count, fix_params, points, to_int

STYLE = {"RAW": ("tab:red", "solid", 0.0), "WAR": ("tab:blue", "dashed", 0.3), "WAW": ("tab:green", "dotted", -0.3)}
_MARKERS = ("o", "s", "^", "D", "v", "P")


@dataclass(frozen=True)
class Arrow:
    kind: str
    tensor: str
    source: str
    sink: str
    start: tuple[float, float]
    end: tuple[float, float]
    carried: bool  # the dependence is carried by a plotted loop

    @property
    def label(self) -> str:
        pair = self.source if self.source == self.sink else f"{self.source} -> {self.sink}"
        return f"{self.kind} {self.tensor} ({pair})"


@dataclass(frozen=True)
class SlicePicture:
    """Everything the picture shows, in numbers."""

    kernel: str
    statement: str
    loops: tuple[str, str]
    fixed: dict[str, int]
    ranges: dict[str, tuple[int, int]]  # plotted loop -> (first, last) in the slice
    window: dict[str, tuple[int, int]]  # plotted loop -> (first, last) drawn
    points: dict[str, list[tuple[float, float]]]  # statement -> drawn positions
    arrows: tuple[Arrow, ...]
    pairs: int  # dependence pairs inside the window (arrows drawn or not)
    limit: int
    notes: tuple[str, ...] = field(default=())
    offsets: dict[str, float] = field(default_factory=dict)  # statement -> shift of its markers

    def position(self, statement: str, values: Mapping[str, int]) -> tuple[float, float] | None:
        """Where the instance ``statement(values)`` is drawn; None when it is outside the picture."""
        x, y = self.loops
        if statement not in self.offsets or x not in values or y not in values:
            return None
        if any(values.get(n, v) != v for n, v in self.fixed.items()):
            return None
        if not all(self.window[n][0] <= values[n] <= self.window[n][1] for n in (x, y)):
            return None
        shift = self.offsets[statement]
        return (values[x] + shift, values[y] + shift)

    @property
    def legend(self) -> list[str]:
        return list(dict.fromkeys(a.label for a in self.arrows))

    @property
    def truncated(self) -> bool:
        return self.pairs > len(self.arrows)


def _fix(dom: isl.Set, loops: tuple[str, ...], values: Mapping[str, int]) -> isl.Set:
    for k, name in enumerate(loops):
        if name in values:
            # From text: a --fix value may not fit the C long of int_from_si.
            dom = dom.fix_val(isl.dim_type.set, k, isl.Val(str(values[name]), dom.get_ctx()))
    return dom


def _box(dom: isl.Set, loops: tuple[str, ...], window: Mapping[str, tuple[int, int]]) -> isl.Set:
    for k, name in enumerate(loops):
        if name in window:
            lo, hi = window[name]
            dom = dom.lower_bound_val(isl.dim_type.set, k, isl.Val(str(lo), dom.get_ctx()))
            dom = dom.upper_bound_val(isl.dim_type.set, k, isl.Val(str(hi), dom.get_ctx()))
    return dom


def _first_values(dom: isl.Set, loops: tuple[str, ...], skip: tuple[str, ...]) -> dict[str, int]:
    """The first instance's value of every loop not in ``skip`` (an empty picture explains nothing)."""
    first = dom.lexmin().sample_point()
    return {name: int(first.get_coordinate_val(isl.dim_type.set, k).to_python())
            for k, name in enumerate(loops) if name not in skip}


def _range(dom: isl.Set, k: int) -> tuple[int, int]:
    lo = dom.dim_min(k).get_pieces()
    hi = dom.dim_max(k).get_pieces()
    return (min(int(a.get_constant_val().to_python()) for _, a in lo),
            max(int(a.get_constant_val().to_python()) for _, a in hi))


def _choose(model: KernelModel, statement: str | None, loops: tuple[str, str] | None) -> tuple[str, str, str]:
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
    return stmt, x, y


def slice_picture(model: KernelModel, deps: list[Dependence], *, loops: tuple[str, str] | None = None,
                  fixed: Mapping[str, int] | None = None, statement: str | None = None,
                  params: Mapping[str, int], window: int = 8, limit: int = 600,
                  start: Mapping[str, int] | None = None) -> SlicePicture:
    """What the picture of the slice shows (bad choices are an ``InputError``).

    ``start`` gives the first value drawn of a plotted loop (default: its
    first value in the slice), to bring a chosen instance into the window.
    """
    stmt, x, y = _choose(model, statement, loops)
    its = model.statement(stmt).loops
    given = dict(fixed or {})
    for name in given:
        if name not in its:
            raise InputError(f"--fix {name}: {stmt} has no loop '{name}' (its loops: {', '.join(its)})")
        if name in (x, y):
            raise InputError(f"--fix {name}: '{name}' is a plotted loop; fix only the others")
    dom = _fix(fix_params(model.statement(stmt).domain, model, params), its, given)
    if dom.is_empty():
        shown = ", ".join(f"{k}={v}" for k, v in given.items())
        raise InputError(f"--fix {shown}: {stmt} has no instance there "
                         f"(with {', '.join(f'{k}={v}' for k, v in params.items()) or 'no parameters'})")
    values = {**given, **_first_values(dom, its, (x, y, *given))}
    plane = _fix(dom, its, values)
    ranges = {x: _range(plane, its.index(x)), y: _range(plane, its.index(y))}
    first = {n: max(lo, min((start or {}).get(n, lo), hi - window + 1)) for n, (lo, hi) in ranges.items()}
    win = {n: (first[n], min(hi, first[n] + window - 1)) for n, (lo, hi) in ranges.items()}
    notes = []
    cut = [n for n in (x, y) if win[n] != ranges[n]]
    if cut:
        notes.append("window: " + ", ".join(f"{n} in {win[n][0]}..{win[n][1]} of {ranges[n][0]}..{ranges[n][1]}"
                                            for n in (x, y)) + f" (at most {window} values of each; --window N)")
    # the statements drawn: the chosen one and every other with both plotted loops
    planes: dict[str, isl.Set] = {}
    for k, s in enumerate(model.statements):
        if x not in s.loops or y not in s.loops:
            continue
        d = _fix(fix_params(s.domain, model, params), s.loops, {n: v for n, v in values.items() if n not in (x, y)})
        if d.is_empty():
            continue
        d = _fix(d, s.loops, _first_values(d, s.loops, (x, y, *values)))
        planes[s.name] = _box(d, s.loops, win)
    order = [s.name for s in model.statements if s.name in planes]
    offset = {name: 0.12 * (order.index(name) - order.index(stmt)) for name in order}

    def pos(name: str, p: tuple[int, ...]) -> tuple[float, float]:
        ls = model.statement(name).loops
        return (p[ls.index(x)] + offset[name], p[ls.index(y)] + offset[name])

    dots = {name: [pos(name, p) for p in points(planes[name])] for name in order}
    arrows: list[Arrow] = []
    pairs = 0
    for d in deps:
        if d.source not in planes or d.sink not in planes:
            continue
        rel = fix_params(d.relation, model, params).intersect_domain(planes[d.source]).intersect_range(planes[d.sink])
        n = to_int(count(rel), params)
        if not n:
            continue
        pairs += n
        hot = bool({x, y} & set(carrying_loops(model, d)))
        n_src = len(model.statement(d.source).loops)
        for p in points(rel.wrap()):
            if len(arrows) >= limit:
                break
            arrows.append(Arrow(d.kind, d.tensor, d.source, d.sink, pos(d.source, p[:n_src]),
                                pos(d.sink, p[n_src:]), hot))
    if not pairs:
        notes.append("no dependence has both ends in this slice")
    elif pairs > len(arrows):
        notes.append(f"drew {len(arrows):,} of {pairs:,} dependence arrows (the limit is {limit:,})")
    return SlicePicture(model.kernel.name, stmt, (x, y), {n: values[n] for n in its if n not in (x, y)},
                        ranges, win, dots, tuple(arrows), pairs, limit, tuple(notes), offset)


def figure_format(out: str) -> str:
    """The format named by ``out``'s suffix; PNG without one (matplotlib would append '.png')."""
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = PurePath(out).suffix[1:].lower()
    if not suffix:
        return "png"
    known = FigureCanvasBase.get_supported_filetypes()
    if suffix not in known:
        raise InputError(f"--plot {out}: cannot draw a '.{suffix}' file (formats: {', '.join(sorted(known))})")
    return suffix


def draw(picture: SlicePicture, out: str | IO, *, fmt: str = "png",
         highlight: tuple[tuple[str, tuple[float, float]], ...] = ()) -> list[str]:
    """Draw ``picture`` to ``out`` (a path or a file object); returns the legend's labels.

    ``highlight`` rings chosen points (a legality witness), each with its label.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x, y = picture.loops
    fig, ax = plt.subplots(figsize=(6.4, 6.4))
    try:
        for k, (name, pts) in enumerate(picture.points.items()):
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, color="black" if k == 0 else "dimgray",
                       marker=_MARKERS[k % len(_MARKERS)], zorder=3, label=f"{name} instances")
        for a in picture.arrows:
            colour, style, rad = STYLE[a.kind]
            ax.annotate("", xy=a.end, xytext=a.start, zorder=2,
                        arrowprops=dict(arrowstyle="->", color=colour, linestyle=style,
                                        lw=1.8 if a.carried else 0.9, alpha=0.85,
                                        connectionstyle=f"arc3,rad={rad}", shrinkA=3, shrinkB=3))
        for k, (label, (hx, hy)) in enumerate(highlight):
            ax.scatter([hx], [hy], s=260, facecolors="none", edgecolors="magenta", linewidths=2.5, zorder=4,
                       label=label)
        for label in picture.legend:
            kind = label.split()[0]
            colour, style, _ = STYLE[kind]
            ax.plot([], [], color=colour, linestyle=style, lw=1.5, label=label)
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        rest = ", ".join(f"{k}={v}" for k, v in picture.fixed.items())
        ax.set_title(f"{picture.kernel}: {picture.statement}({x}, {y})" + (f" at {rest}" if rest else ""),
                     fontsize=10)
        if picture.notes:
            ax.text(0.5, -0.12, "\n".join(picture.notes), transform=ax.transAxes, ha="center", va="top",
                    fontsize=8, color="dimgray")
        ax.set_xticks(range(picture.window[x][0], picture.window[x][1] + 1))
        ax.set_yticks(range(picture.window[y][0], picture.window[y][1] + 1))
        ax.grid(True, alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
        fig.tight_layout()
        # no date and fixed element ids in an SVG: the same input gives the same page
        svg = (fmt or str(out).rpartition(".")[2]) == "svg"
        with matplotlib.rc_context({"svg.hashsalt": "polymap"}):
            fig.savefig(out, dpi=100, format=fmt, bbox_inches="tight", metadata={"Date": None} if svg else None)
        return labels
    finally:
        plt.close(fig)


def plot_iteration_space(model: KernelModel, deps: list[Dependence], out: str, *,
                         loops: tuple[str, str] | None = None, fixed: Mapping[str, int] | None = None,
                         statement: str | None = None, params: Mapping[str, int], window: int = 8,
                         limit: int = 600) -> SlicePicture:
    """Compute the slice, draw it to ``out`` and return what was drawn."""
    fmt = figure_format(out)
    picture = slice_picture(model, deps, loops=loops, fixed=fixed, statement=statement, params=params,
                            window=window, limit=limit)
    draw(picture, out, fmt=fmt)
    return picture
