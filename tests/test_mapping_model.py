"""The Mapping's invariants hold however it is built: a bad Mapping cannot be constructed."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, strategies as st

from polymap.mapping.model import LevelMapping, Mapping

LOOPS = ("i", "j", "k")
KEEP = ("A", "B", "C")


def level(name: str = "L", tile: tuple = (None, None, None), order: tuple = LOOPS, spatial: tuple = (),
          keep: tuple = KEEP) -> LevelMapping:
    return LevelMapping(name, tile, order, spatial, keep)


def mapping(*levels: LevelMapping, loops: tuple = LOOPS, nest: int = 0) -> Mapping:
    return Mapping("gemm", nest, loops, tuple(levels))


def test_a_good_mapping_builds_and_is_frozen():
    m = mapping(level("DRAM"), level("RF", (4, 8, None), ("k", "i", "j"), ("i",)))
    assert m.tile(1) == {"i": 4, "j": 8, "k": None}
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.nest = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.levels[0].order = ("j", "i", "k")  # type: ignore[misc]


@pytest.mark.parametrize("order", [("i", "i", "k"), ("j", "j", "j"), ("i", "j", "k", "i")])
def test_order_with_a_loop_twice_is_refused(order):
    with pytest.raises(ValueError, match="more than once"):
        level(order=order)


@pytest.mark.parametrize("order", [("i", "j"), ("i", "j", "x"), ("i", "j", "k", "l")])
def test_order_that_is_not_a_permutation_of_the_loops_is_refused(order):
    with pytest.raises(ValueError, match="permutation"):
        mapping(level(order=order))


def test_spatial_loop_outside_the_order_is_refused():
    with pytest.raises(ValueError, match="not in the order"):
        level(spatial=("x",))
    with pytest.raises(ValueError, match="more than once"):
        level(spatial=("i", "i"))


@pytest.mark.parametrize("tile", [(None, None), (1, 2, 3, 4)])
def test_tile_that_does_not_name_the_loops_is_refused(tile):
    with pytest.raises(ValueError, match="tile extents"):
        mapping(level(tile=tile))


@pytest.mark.parametrize("extent", [0, -3, 2.5, True, "4"])
def test_tile_extent_must_be_a_positive_integer(extent):
    with pytest.raises(ValueError, match="positive integer"):
        level(tile=(extent, None, None))


def test_loops_distinct_levels_present_nest_an_index():
    with pytest.raises(ValueError, match="more than once"):
        mapping(level(order=("i", "i", "k")), loops=("i", "i", "k"))
    with pytest.raises(ValueError, match="non-empty"):
        mapping()
    with pytest.raises(ValueError, match="nest"):
        mapping(level(), nest=-1)
    with pytest.raises(ValueError, match="tuple"):
        level(order=["i", "j", "k"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep"):
        level(keep=("A", "A"))


@given(st.lists(st.sampled_from(LOOPS + ("x",)), max_size=5),
       st.lists(st.sampled_from(LOOPS + ("x",)), max_size=3))
def test_built_exactly_when_order_is_a_permutation_and_spatial_a_subset(order, spatial):
    good = sorted(order) == sorted(LOOPS) and len(set(spatial)) == len(spatial) and set(spatial) <= set(order)
    if good:
        m = mapping(level(order=tuple(order), spatial=tuple(spatial)))
        assert m.levels[0].order == tuple(order)
    else:
        with pytest.raises(ValueError):
            mapping(level(order=tuple(order), spatial=tuple(spatial)))
