"""The HTML report: one self-contained page (inline SVG and CSS, no network) from gathered facts.

Before: :class:`~polymap.reports.html.facts.KernelFacts` per kernel. After:
one page with, per kernel, the kernel text, its dependences and loop classes,
the iteration space with the dependence arrows (and the legality witness
ringed), the legality verdict, the mapping as nested tiles and a table,
traffic per level and tensor (table and bars), the energy breakdown and
cycles, the roofline, and the generated C code.
"""
from __future__ import annotations

from html import escape

from polymap import pretty
from polymap.reports.html.facts import KernelFacts
from polymap.reports.html.svg import bars, nested_tiles, stacked

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; line-height: 1.4; }
h1 { border-bottom: 2px solid #4e79a7; } h2 { margin-top: 1.6em; color: #4e79a7; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border: 1px solid #ccc; padding: 2px 8px; }
th { background: #eef2f7; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; font-size: 12px; border: 1px solid #ddd; }
.legal { color: #2e7d32; font-weight: bold; } .illegal { color: #c62828; font-weight: bold; }
.note { color: #555; font-size: 90%; } .kernel { border-top: 4px solid #ddd; margin-top: 2em; }
nav a { margin-right: 1em; }
"""


def _table(head: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td{" class=n" if k in numeric else ""}>{escape(str(c))}</td>'
                                    for k, c in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _num(v: int | float | None) -> str:
    return "-" if v is None else f"{v:,}" if isinstance(v, int) else f"{v:,.4g}"


def _deps(f: KernelFacts) -> str:
    rows = []
    for fact in f.deps:
        d = fact.dependence
        dist = (" ".join("(" + ", ".join(map(str, v)) + ")" for v, _ in fact.exact) if fact.exact is not None
                else "(" + ", ".join(fact.distance) + ")")
        rows.append([d.kind, f"{d.source} -> {d.sink}", d.tensor, dist, "yes" if d.reduction else ""])
    deps = _table(["kind", "source -> sink", "tensor", "distance vectors", "reduction"], rows) if rows \
        else "<p>No dependence: every instance is independent.</p>"
    classes = _table(["loop", "parallel", "reduction"],
                     [[n, "yes" if c.parallel else "no", "yes" if c.reduction else "no"] for n, c in f.classes.items()])
    return f"<h3>Dependences (value-based)</h3>{deps}<h3>Loop classes</h3>{classes}"


def _slice(f: KernelFacts) -> str:
    if f.slice is None:
        return f'<p class="note">{escape(f.slice_refusal or "no picture")}</p>'
    p = f.slice
    x, y = p.loops
    fixed = ", ".join(f"{k}={v}" for k, v in p.fixed.items())
    text = (f"<p>Instances of <b>{escape(p.statement)}</b> (and of every statement with loops {escape(x)} and "
            f"{escape(y)}) over {escape(x)} and {escape(y)}" + (f", at {escape(fixed)}" if fixed else "") +
            "; one arrow per dependence pair: RAW solid red, WAR dashed blue, WAW dotted green"
            + ("; the ringed instances are the legality witness" if f.witness_labels else "") + ".</p>")
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in p.notes)
    return text + f.slice_svg + notes


def _legality(f: KernelFacts) -> str:
    v = f.verdict
    if v is None:
        return "<p>No mapping: nothing to check.</p>"
    head = ('<p class="legal">The mapping is legal.</p>' if v.legal
            else '<p class="illegal">The mapping is ILLEGAL.</p>')
    items = "".join(f"<li><b>{escape(x.kind)}</b> {escape(x.source)} -> {escape(x.sink)} "
                    f"{escape(x.tensor)}: {escape(x.reason)}</li>" for x in v.violations)
    notes = "".join(f"<li>{escape(n)}</li>" for n in (*v.notes, *v.hints))
    return head + (f"<ol>{items}</ol>" if items else "") + (f'<ul class="note">{notes}</ul>' if notes else "")


def _tiles(f: KernelFacts) -> list[tuple[str, dict[str, int], tuple[str, ...]]]:
    cur = dict(f.extents)
    out = []
    for lm in f.mapping.levels:
        for loop, t in zip(f.mapping.loops, lm.tile):
            if t is not None:
                cur[loop] = min(t, cur.get(loop, t))
        out.append((lm.level, dict(cur), lm.spatial))
    return out


def _mapping(f: KernelFacts) -> str:
    if f.mapping is None:
        return ("<p>No mapping: none was given and the default heuristic maps no nest of this kernel; "
                "the code below runs the original loop order.</p>")
    m = f.mapping
    rows = []
    for lm, (name, tile, _) in zip(m.levels, _tiles(f)):
        rows.append([name, ", ".join(f"{k}={v}" for k, v in tile.items()), ", ".join(lm.order),
                     ", ".join(lm.spatial) or "-", ", ".join(lm.keep)])
    table = _table(["level", "tile (extent per loop)", "order (outer -> inner)", "spatial", "keeps"], rows)
    loops = f.slice.loops if f.slice is not None and set(f.slice.loops) <= set(m.loops) else tuple(m.loops[:2])
    picture = ""
    if len(loops) == 2:
        x, y = loops
        picture = nested_tiles([(name, tile.get(x, 1), tile.get(y, 1), bool(set(sp) & {x, y}))
                                for name, tile, sp in _tiles(f)], x, y)
    return f"<p>Mapping: {escape(f.mapping_source)}.</p>{table}{picture}"


def _traffic(f: KernelFacts) -> str:
    if f.cost is None:
        return f'<p class="note">{escape(f.cost_refusal or "no counts")}</p>'
    c = f.cost.counts
    rows, sizes = [], []
    for lv in c.levels:
        for t in lv.tensors:
            rows.append([lv.name, t.tensor, _num(t.fills), _num(t.writebacks), _num(t.reads), _num(t.updates)])
            sizes.append((f"{lv.name} {t.tensor}", float(sum(v or 0 for v in (t.fills, t.writebacks, t.reads,
                                                                              t.updates)))))
    table = _table(["level", "tensor", "fills", "writebacks", "reads", "updates"], rows, {2, 3, 4, 5})
    foot = "".join(f"<li>{escape(lv.name)}: footprint {lv.footprint:,} elements</li>"
                   for lv in c.levels if lv.footprint is not None)
    return (f"<p>{c.instances:,} statement instances; counts in elements, summed over the instances of each "
            f"level.</p>{table}<ul>{foot}</ul><h3>Elements moved per level and tensor "
            f"(fills + writebacks + reads + updates)</h3>{bars(sizes)}")


def _energy(f: KernelFacts) -> str:
    if f.cost is None:
        return ""
    r = f.cost
    terms = "".join(f"<li>{escape(n)}: {v:,.0f} cycles</li>" for n, v in r.cycle_terms)
    return (f"<p>Energy {r.energy_pj:,.0f} pJ; cycles {r.cycles:,.0f} (bottleneck: {escape(r.bottleneck)}); "
            f"utilization {100 * r.utilization:.1f}%.</p>{stacked(list(r.energy_breakdown))}<ul>{terms}</ul>")


def _kernel(f: KernelFacts, k: int) -> str:
    params = ", ".join(f"{n}={v}" for n, v in f.params.items())
    code = (f"<pre>{escape(f.c_source)}</pre>" if f.c_source
            else f'<p class="note">{escape(f.code_refusal)}</p>')
    parts = [
        f'<section class="kernel" id="k{k}"><h1>Kernel {escape(f.kernel.name)}</h1>',
        f"<p>Sizes {escape(params or '(none)')}; architecture {escape(f.arch.name)}.</p>",
        f"<h2>The kernel</h2><pre>{escape(pretty.kernel(f.kernel))}</pre>",
        f"<h2>Dependences and loop classes</h2>{_deps(f)}",
        f"<h2>Iteration space</h2>{_slice(f)}",
        f"<h2>Legality of the mapping</h2>{_legality(f)}",
        f"<h2>The mapping as nested tiles</h2>{_mapping(f)}",
        f"<h2>Traffic per level and tensor</h2>{_traffic(f)}",
        f"<h2>Energy and cycles</h2>{_energy(f)}",
        "<h2>Roofline</h2>" + (f.roofline_svg or '<p class="note">no counts, no roofline</p>'),
        f"<h2>Generated C code</h2>{code}</section>",
    ]
    return "\n".join(parts)


def render(facts: list[KernelFacts], *, title: str) -> str:
    """The whole page."""
    nav = "".join(f'<a href="#k{k}">{escape(f.kernel.name)}</a>' for k, f in enumerate(facts))
    body = "\n".join(_kernel(f, k) for k, f in enumerate(facts))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{_CSS}</style></head><body><nav>{nav}</nav>\n{body}\n"
            f"<script>console.log('polymap report: {len(facts)} kernel(s)');</script></body></html>\n")
