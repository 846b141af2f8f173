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
