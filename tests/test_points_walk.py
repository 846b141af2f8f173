"""``poly.points``, the walk behind every count by points: every point of the set once, as tuples.

Its per-point work was cut (issue 9: the callbacks are most of a skewed candidate's counts), so it is
checked here against ISL's own count and membership on generated sets and maps, unions of several
spaces and wrapped relations included.
"""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from polymap.islcheck import isl
from polymap.poly import points


def _check(obj) -> None:
    s = obj.wrap() if isinstance(obj, (isl.Map, isl.UnionMap)) else obj
    got = points(obj)
    sets: list = []
    (s.foreach_set(sets.append) if isinstance(s, isl.UnionSet) else sets.append(s))
    # each point once, all of them (ISL's count, per space)
    assert len(got) == len(set(got)) == sum(one.count_val().to_python() for one in sets)
    for p in got:  # each one a point of the set (of one of the spaces with its width)
        assert any(one.dim(isl.dim_type.set) == len(p) and not _fixed(one, p).is_empty()
                   for one in [x.flatten() for x in sets])


def _fixed(s, p):
    for k, v in enumerate(p):
        s = s.fix_val(isl.dim_type.set, k, isl.Val(v))
    return s

@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(-2, 2), st.integers(1, 3), st.integers(0, 2))
def test_points_of_skewed_strided_sets_and_relations(n, m, skew, stride, shift):
    _check(isl.Set(f"{{ [a, b] : 0 <= a < {n} and {skew} * a <= b < {skew} * a + {m} "
                   f"and exists q : {stride} q = a + b + {shift} }}"))
    _check(isl.Map(f"{{ S[i] -> A[j, k] : 0 <= i < {n} and i <= j < i + {m} and k = {skew} * i + j }}"))
    _check(isl.UnionMap(f"{{ S[i] -> A[j] : 0 <= i < {n} and i <= j <= i + {stride}; T[] -> B[k] : 0 <= k < {m} }}"))


def test_points_of_empty_and_zero_dimensional_sets():
    assert points(isl.Set("{ [a] : false }")) == []
    assert points(isl.Set("{ [] }")) == [()]
    assert sorted(points(isl.UnionSet("{ [a] : 0 <= a < 2; T[] }"))) == [(), (0,), (1,)]


def _walk_every_dimension(obj) -> list[tuple[int, ...]]:
    """The walk before fixed dimensions were skipped: every coordinate read at every point."""
    s = obj.wrap() if isinstance(obj, (isl.Map, isl.UnionMap)) else obj
    sets: list = []
    (s.foreach_set(sets.append) if isinstance(s, isl.UnionSet) else sets.append(s))
    out: list[tuple[int, ...]] = []
    for one in sets:
        n = one.dim(isl.dim_type.set)
        one.foreach_point(lambda p: out.append(tuple(
            p.get_coordinate_val(isl.dim_type.set, k).get_num_si() for k in range(n))))
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(0, 2), st.integers(2, 4), st.integers(-3, 3))
def test_fixed_dimensions_are_put_back_in_place_and_order(n, m, skew, tile, phase):
    """A time vector's constant dimensions (padding, phases; heat-3d: 20 of 27) are not read per point
    but put back: the same points, in the same order, as reading every dimension, for skewed tiles with
    divisions, pieces fixed to the same value (skipped) or to different values (walked), and relations
    with parameters fixed."""
    cases = [
        isl.Set(f"{{ [0, t, {phase}, a, 0, b, 7] : 0 <= a < {n} and {skew} * a <= b < {skew} * a + {m} "
                f"and t = floor(a / {tile}) }}"),
        isl.Set(f"{{ [{phase}, a, 0] : 0 <= a < {n}; [{phase}, a, 0] : {n} + 2 <= a < {n} + 2 + {m} }}"),
        isl.Set(f"{{ [{phase}, a, 0] : 0 <= a < {n}; [{phase} + 1, a, 1] : 0 <= a < {m} }}"),
        isl.Map(f"[N] -> {{ S[i, j] -> [0, q, 1, i, j + {skew} * i, 0] : N = {n} and 0 <= i < N and 0 <= j < {m} "
                f"and q = floor((j + {skew} * i) / {tile}) }}"),
        isl.UnionMap(f"{{ S[i] -> A[0, i] : 0 <= i < {n}; T[] -> B[{phase}, k] : 0 <= k < {m} }}"),
    ]
    for obj in cases:
        _check(obj)
        assert points(obj) == _walk_every_dimension(obj)
