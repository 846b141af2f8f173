"""The mapping file of the skew ``check`` suggests (``check --suggest OUT.yaml``).

``check`` says, when an order is illegal, which skew would make the band
permutable (:func:`polymap.passes.dependences.loop_classes.skew_coefficients`).
This writes it as a mapping a student can run ``check``, ``transform`` and
``compile`` on: every statement of the nest at its skewed coordinates
(same loop names), the band tiled in them. For seidel-2d::

    hint: skewing i -> i + t, j -> j + 2*t + i ...
      ->  schedule: {relax: {t: t, i: i + t, j: j + 2*t + i}}
          levels: [{level: DRAM, order: [t, i, j]}, ..., {level: L2, tile: {t: 16, i: 16, j: 16}}, ...]
"""
from __future__ import annotations

from polymap.mapping.model import LevelMapping, Mapping, nest_loops, nest_tensors
from polymap.mapping.schedule import schedule_entry
from polymap.passes.dependences.loop_classes import skew_coefficients
from polymap.machine.arch import Architecture
from polymap.poly import KernelModel

#: Tile extent of every band loop in the suggested mapping.
SUGGESTED_TILE = 16


def suggested_mapping(model: KernelModel, nest: int, arch: Architecture) -> Mapping | None:
    """The nest skewed as ``check`` suggests and tiled on ``arch``; None when there is no such skew."""
    kernel = model.kernel
    band = nest_loops(kernel, nest)
    stmts = model.nest_statements(nest)
    skews = skew_coefficients(model, stmts, band)
    if not skews:
        return None
    entries = []
    for st in stmts:
        exprs = []
        for x in st.loops:
            terms = [x]
            for m, c in enumerate(skews.get(x, ())):
                if c and band[m] in st.loops:
                    terms.append(band[m] if c == 1 else f"{c}*{band[m]}")
            exprs.append(" + ".join(terms))
        if tuple(exprs) != st.loops:
            entries.append(schedule_entry(model, st.name, st.loops, tuple(exprs)))
    keep = nest_tensors(kernel, nest)
    n = len(arch.levels)
    tiled = max(1, n - 3)
    levels = []
    for l, lv in enumerate(arch.levels):
        if l == 0 or l < tiled:
            tile: tuple = (None,) * len(band)
        elif l < n - 1 or n == 2:
            tile = (SUGGESTED_TILE,) * len(band) if l < n - 1 else (1,) * len(band)
        else:
            tile = (1,) * len(band)
        levels.append(LevelMapping(lv.name, tile, band, (), keep))
    return Mapping(kernel.name, nest, band, tuple(levels), (), tuple(entries))
