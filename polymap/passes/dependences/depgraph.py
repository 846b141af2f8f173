"""The statement-level dependence graph and its strongly connected components.

One node per statement, one edge per (source, sink) pair of statements that
has a dependence, labelled with the kinds and tensors. A strongly connected
component with more than one statement (or a self loop) is a recurrence:
its statements cannot be distributed into separate loops.

Before/after for gemm_scalar_acc (memory-based)::

    zero -> acc (RAW, WAW t), acc -> store (RAW t), store -> zero (WAR t) ...
    SCCs: [acc, store, zero]
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from polymap.poly import KernelModel
from polymap.passes.dependences.dependences import Dependence
from polymap.passes.dependences.loop_classes import carrier_of, carrying_loops, distance_vector, exact_distances

if TYPE_CHECKING:  # annotations only; networkx is imported where a graph is built, so that a compile never
    from networkx import MultiDiGraph  # pays for it (0.1-0.3 s of every process's start, no bytecode cached here)


def dependence_graph(model: KernelModel, deps: Iterable[Dependence]) -> MultiDiGraph:
    """Statements as nodes (textual order), one edge per grouped dependence.

    Each edge carries ``distances``: ``(vector text, carrying loop)`` pairs,
    the exact vectors when they are few constants (``("(0,1,-1)", "i")``),
    else the direction vector with every loop that carries some pair
    (``("(1,0+,0)", "k")``); ``""`` names a loop-independent dependence.
    """
    import networkx as nx

    g = nx.MultiDiGraph(name=model.kernel.name)
    for s in model.statements:
        g.add_node(s.name, loops=",".join(s.loops))
    for d in deps:
        g.add_edge(d.source, d.sink, kind=d.kind, tensor=d.tensor, distances=_distances(model, d))
    return g


def _distances(model: KernelModel, d: Dependence) -> tuple[tuple[str, str], ...]:
    vectors = exact_distances(model, d)
    if vectors is not None:
        return tuple(("(" + ",".join(str(x) for x in v) + ")", carrier_of(v, model, d)) for v in vectors)
    text = "(" + ",".join(distance_vector(model, d)) + ")"
    return ((text, "/".join(c or "-" for c in carrying_loops(model, d))),)


def components(graph: MultiDiGraph) -> list[list[str]]:
    """Strongly connected components, each in textual order, in topological order of the condensation."""
    import networkx as nx

    order = {n: k for k, n in enumerate(graph.nodes)}
    cond = nx.condensation(nx.DiGraph(graph))
    out = []
    for c in nx.topological_sort(cond):
        out.append(sorted(cond.nodes[c]["members"], key=order.get))
    return out


def recurrences(graph: MultiDiGraph) -> list[list[str]]:
    """Components that form a cycle (several statements, or one with a self edge)."""
    return [c for c in components(graph) if len(c) > 1 or graph.has_edge(c[0], c[0])]


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(graph: MultiDiGraph) -> str:
    """DOT text of the graph, SCCs as clusters (written by hand: pydot is optional)."""
    lines = [f"digraph {_quote(graph.graph.get('name', 'deps'))} {{", "  node [shape=box];"]
    for k, comp in enumerate(components(graph)):
        if len(comp) > 1:
            lines.append(f"  subgraph cluster_{k} {{ label={_quote('SCC ' + str(k))}; style=dashed;")
            lines += [f"    {_quote(n)};" for n in comp]
            lines.append("  }")
    for n, data in graph.nodes(data=True):
        label = _quote(n + "(" + data.get("loops", "") + ")")
        lines.append(f"  {_quote(n)} [label={label}];")
    merged: dict[tuple[str, str], list[str]] = {}
    for a, b, data in graph.edges(data=True):
        dists = "; ".join(f"{v} {c or 'loop-independent'}" for v, c in data.get("distances", ()))
        label = f"{data['kind']} {data['tensor']}" + (f": {dists}" if dists else "")
        merged.setdefault((a, b), [])
        if label not in merged[(a, b)]:
            merged[(a, b)].append(label)
    style = {"RAW": "solid", "WAR": "dashed", "WAW": "dotted"}
    for (a, b), labels in merged.items():
        first = labels[0].split()[0]
        lines.append(f"  {_quote(a)} -> {_quote(b)} [label={_quote(chr(10).join(labels))}, style={style[first]}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
