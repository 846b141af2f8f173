"""Small hand-drawn SVG pictures for the HTML report: bars and nested tiles.

``bars([("GLB B", 262144), ...])`` draws one horizontal bar per row, scaled to
the largest; ``nested_tiles(levels, x, y)`` draws every level's tile of two
loops as nested rectangles, outermost first (sides on a log scale so that a
1 x 16 register tile stays visible inside a 256 x 256 nest)::

    +-------------------- DRAM 64 x 64 ---+
    | +--- GLB 32 x 32 ---+               |
    | | RF 1 x 16         |               |
"""
from __future__ import annotations

import math
from html import escape

_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")


def bars(rows: list[tuple[str, float]], *, width: int = 560, unit: str = "") -> str:
    """One labelled horizontal bar per ``(label, value)``."""
    if not rows:
        return ""
    top = max(v for _, v in rows) or 1.0
    label_w, bar_w, h = 170, width - 170 - 110, 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h * len(rows) + 8}" '
           f'role="img" class="bars">']
    for k, (label, value) in enumerate(rows):
        y = 4 + k * h
        w = max(1.0, bar_w * value / top) if value else 0.0
        colour = _COLOURS[k % len(_COLOURS)]
        out.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" font-size="12">{escape(label)}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{h - 6}" fill="{colour}"/>')
        out.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 14}" font-size="12">{value:,.0f}{escape(unit)}</text>')
    out.append("</svg>")
    return "".join(out)


def stacked(parts: list[tuple[str, float]], *, width: int = 560) -> str:
    """One bar split into ``parts`` (an energy breakdown), with a legend under it."""
    total = sum(v for _, v in parts) or 1.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{44 + 18 * len(parts)}" '
           f'role="img" class="stacked">']
    x = 0.0
    for k, (label, value) in enumerate(parts):
        w = width * value / total
        out.append(f'<rect x="{x:.1f}" y="4" width="{w:.1f}" height="26" fill="{_COLOURS[k % len(_COLOURS)]}">'
                   f'<title>{escape(label)}: {value:,.0f} pJ</title></rect>')
        x += w
    for k, (label, value) in enumerate(parts):
        y = 48 + 18 * k
        out.append(f'<rect x="0" y="{y - 10}" width="12" height="12" fill="{_COLOURS[k % len(_COLOURS)]}"/>')
        out.append(f'<text x="18" y="{y}" font-size="12">{escape(label)}: {value:,.0f} pJ '
                   f'({100 * value / total:.1f}%)</text>')
    out.append("</svg>")
    return "".join(out)


def nested_tiles(levels: list[tuple[str, int, int, bool]], x: str, y: str, *, size: int = 360) -> str:
    """``levels``: ``(name, extent of x, extent of y, spatial?)`` outermost first; one rectangle each."""
    if not levels:
        return ""
    top_x = max(levels[0][1], 1)
    top_y = max(levels[0][2], 1)

    def side(v: int, top: int) -> float:
        return size * math.log2(v + 1) / math.log2(top + 1) if top > 0 else size

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size + 180}" height="{size + 40}" '
           f'role="img" class="tiles">',
           f'<text x="{size / 2:.0f}" y="{size + 32}" text-anchor="middle" font-size="12">{escape(x)} '
           f'(sides on a log scale)</text>',
           f'<text x="{size + 8}" y="14" font-size="12">{escape(y)} &#8595;</text>']
    for k, (name, ex, ey, spatial) in enumerate(levels):
        w, h = side(ex, top_x), side(ey, top_y)
        colour = _COLOURS[k % len(_COLOURS)]
        dash = ' stroke-dasharray="6 3"' if spatial else ""
        out.append(f'<rect x="2" y="2" width="{max(w, 3):.1f}" height="{max(h, 3):.1f}" fill="{colour}" '
                   f'fill-opacity="0.18" stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{size + 8}" y="{34 + 16 * k}" font-size="12" fill="{colour}">{escape(name)}: '
                   f'{ex} x {ey}{" (spatial below)" if spatial else ""}</text>')
    out.append("</svg>")
    return "".join(out)
