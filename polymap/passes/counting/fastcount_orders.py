"""Fast exact counts of every loop order of a batch of tiles at once.

Before -> after::

    tiles (B configs), spatial sets, the loops each level may permute
      ->  entries[l][X] of shape (n_0, n_1, ..., n_{L-2}, B): one per order combination and config

Why this is exact and cheap. In :meth:`Evaluator._entries
<polymap.passes.counting.fastcount.Evaluator._entries>` the elements that
enter level ``l`` are the first residency's plus, for every temporal time
dimension ``j`` (loop ``y`` at level ``k``), a term that depends on the
tiles, on ``k``, ``y``, and on which loops stand *after* ``y`` in level
``k``'s order (they restart; the others keep their interval); the levels
between ``k`` and ``l`` enter through their spatial sets only. So level
``k``'s order ``pi`` contributes ``sum_i term(k, pi[i], set(pi[i+1:]))``
and the orders of different levels add up. The terms are computed once per
``(k, y, after)`` (at most ``m 2^(m-1)`` per level), each order's sum per
level follows, and every combination of per-level orders is a broadcast
sum: the same integers as :class:`Evaluator` computes one structure at a
time (``tests/test_fastcount_orders.py`` compares them).
"""
from __future__ import annotations

from itertools import permutations

import numpy as np

from polymap.passes.counting import fastcount_forms as F
from polymap.passes.counting import fastcount_halo as H
from polymap.passes.counting.fastcount import (Evaluator, Structure, _tensor_sum, first_states,
                                               group_shifts, loop_chains, pair_states)
from polymap.passes.counting.fastcount_nest import FastNest, TensorShape


#: ``(parent level, tensor)``: a multicast span whose group entries are asked for, or None (per instance).
Span = tuple[int, str] | None


class OrderTerms:
    """The per-``(level, loop, after)`` terms of one batch of tiles (see the module doc)."""

    def __init__(self, nest: FastNest, spatial: tuple[frozenset[int], ...], keep: tuple[frozenset[str], ...],
                 tiles: np.ndarray) -> None:
        n, m = len(spatial), len(nest.loops)
        self.nest, self.spatial, self.keep, self.n, self.m = nest, spatial, keep, n, m
        self.ev = Evaluator(nest, Structure(tuple(tuple(range(m)) for _ in range(n)), spatial, keep))
        self.T = self.ev.resolve(np.asarray(tiles, dtype=np.int64))
        self.chains = loop_chains(nest, self.T, n)
        self.cache: dict = {}
        self.unused = {t.name: tuple(x for x in range(m) if x not in t.loops) for t in nest.tensors}

    def kept(self, l: int, span: Span = None) -> list[TensorShape]:
        """The tensors whose entries into level ``l`` are counted: those it keeps, or ``span``'s one."""
        if span is not None:
            return [t for t in self.nest.tensors if t.name == span[1]]
        return [t for t in self.nest.tensors if t.name in self.keep[l]]

    def groups(self, span: Span) -> dict[int, int]:
        """The halo loops ``span`` = ``(parent, X)`` multicasts across, with their levels (or none)."""
        if span is None:
            return {}
        t = next(t for t in self.nest.tensors if t.name == span[1])
        return self.ev.halo_groups(t, span[0])

    def names(self, l: int, span: Span = None) -> list:
        """Keys of the entries of level ``l``: each kept tensor, and ``(X, "init")`` for those an
        initialisation accesses (the elements entering at its residencies)."""
        kept = self.kept(l, span)
        return [t.name for t in kept] + [(t.name, "init") for t in kept if t.init_reads or t.init_writes]

    def first(self, l: int, rows: slice = slice(None), span: Span = None) -> dict:
        """``sum |D(first residency)|`` over the instances of level ``l``, per kept tensor (of ``rows``);
        with an initialisation the first residency is its own. With ``span`` = ``(parent, X)``:
        ``X``'s union over each group of children ``parent`` multicasts to."""
        groups = self.groups(span)
        states = first_states(self.nest, self.spatial, self.T, self.chains, l, groups)
        shifts = group_shifts(self.T, groups)
        ones = np.ones(self.T.shape[0], dtype=np.int64)
        kept = self.kept(l, span)
        x0 = self.nest.init_loop
        out = {t.name: (_tensor_sum(t, states, self.m, shifts, (x0, self.nest.only(t))) * ones)[rows] for t in kept}
        out.update({(t.name, "init"): out[t.name] for t in kept if t.init_reads or t.init_writes})
        return out

    def term(self, k: int, y: int, after: frozenset[int], l: int, span: Span = None) -> dict[str, np.ndarray]:
        """Elements entering level ``l`` at the steps of loop ``y`` at level ``k``, per kept tensor.

        ``|D(r')| - |D(r) & D(r')|`` summed over the steps is a product over the tensor's
        subscripts (and a count per loop it does not use) of sums over each loop's pair states,
        and a loop's pair states depend only on whether it is ``y``, after ``y`` or before it:
        those pieces are computed once per level pair and combined here.
        """
        variant = {x: "step" if x == y else ("after" if x in after else "before") for x in range(self.m)}
        groups = self.groups(span)
        out = {}
        for key in self.names(l, span):
            t = next(u for u in self.kept(l, span) if u.name == (key if isinstance(key, str) else key[0]))
            # (X, "init"): only the steps into an initialisation's residency (its loop's pairs filtered)
            v = variant if isinstance(key, str) else {**variant, self.nest.init_loop: variant[self.nest.init_loop] + "+init"}
            size = both = 1
            for sub in t.subscripts:
                s, b = self._sub_sums(k, l, sub, tuple(v[x] for x, _ in sub), groups)
                size, both = size * s, both * b
            rest_size = rest_both = 1
            for x in self.unused[t.name]:
                s, b = self._totals(k, l, x, v[x], self.nest.only(t) if x == self.nest.init_loop else None)
                rest_size, rest_both = rest_size * s, rest_both * b
            out[key] = size * rest_size - both * rest_both
        return out

    def _pair_states(self, k: int, l: int, x: int, variant: str, group: int | None = None) -> list[F.Pair]:
        key = ("pairs", k, l, x, variant, group)
        if key not in self.cache:
            if variant.endswith("+init"):
                self.cache[key] = F.into_init(self._pair_states(k, l, x, variant[:-len("+init")], group))
            else:
                self.cache[key] = pair_states(self.nest, self.spatial, self.T, self.chains, k, l, x, variant, group)
        return self.cache[key]

    def _totals(self, k: int, l: int, x: int, variant: str, only: str | None) -> tuple:
        """The pair factors of a loop in no subscript of a tensor (:func:`F.pair_totals_holding`)."""
        key = ("totals", k, l, x, variant, only)
        if key not in self.cache:
            self.cache[key] = F.pair_totals_holding(self._pair_states(k, l, x, variant), only)
        return self.cache[key]

    def _sub_sums(self, k: int, l: int, sub: tuple, variants: tuple[str, ...], groups: dict[int, int]
                  ) -> tuple[np.ndarray, np.ndarray]:
        """``(sum |D(r')|, sum |D(r) & D(r')|)`` of one subscript (its multicast group's union sizes
        when ``groups`` spreads one of its loops)."""
        spread = tuple((x, groups[x]) for x, _ in sub if x in groups)
        key = ("sub", k, l, sub, variants, spread)
        if key not in self.cache:
            pairs = {x: self._pair_states(k, l, x, v, groups.get(x)) for (x, _), v in zip(sub, variants)}
            if spread:
                self.cache[key] = H.union_pair_sums(sub, pairs, group_shifts(self.T, dict(spread)))
            else:
                self.cache[key] = F.group_pair_sums(sub, pairs)
        return self.cache[key]

    def level_sums(self, k: int, perms: list[tuple[int, ...]], l: int,
                   rows: slice = slice(None), span: Span = None) -> dict[str, np.ndarray]:
        """Per kept tensor of level ``l``: ``(len(perms), B)``, level ``k``'s contribution for each order.

        An order is a permutation of the level's moving loops; the loops that do not step
        (trip count 1 in ``rows``, or spatial) count as standing before them, which gives the
        same counts as anywhere else, so the terms serve every group of rows alike.
        """
        names = self.names(l, span)
        B = len(range(*rows.indices(self.T.shape[0])))
        if not perms or not perms[0]:
            return {x: np.zeros((len(perms), B), dtype=np.int64) for x in names}
        keys: dict = {}
        ids = np.array([[keys.setdefault((y, frozenset(perm[i + 1:])), len(keys))
                         for i, y in enumerate(perm)] for perm in perms], dtype=np.int64)
        stacked = {x: np.empty((len(keys), B), dtype=np.int64) for x in names}
        for (y, after), j in keys.items():
            t = self.term(k, y, after, l, span)
            for x in names:
                stacked[x][j] = np.broadcast_to(t[x], (self.T.shape[0],))[rows]
        return {x: stacked[x][ids].sum(axis=1) for x in names}


def all_orders(items: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every permutation, in the order of :func:`itertools.permutations` (lexicographic by position)."""
    return list(permutations(items))


def entries_by_order(terms: OrderTerms, perms: tuple[list[tuple[int, ...]], ...],
                     rows: slice = slice(None)) -> list[dict[str, np.ndarray] | None]:
    """``entries[l][X]`` of shape ``(len(perms[0]), ..., len(perms[L-2]), B)`` for every level ``l >= 1``.

    ``perms[k]`` are level ``k``'s orders of its moving loops (temporal, trip count > 1 in ``rows``).
    """
    n = terms.n
    shape_of = [len(p) for p in perms]
    out: list[dict[str, np.ndarray] | None] = [None]
    for l in range(1, n):
        acc = {x: v.reshape((1,) * len(perms) + (-1,)) for x, v in terms.first(l, rows).items()}
        for k in range(l):
            sums = terms.level_sums(k, perms[k], l, rows)
            shape = [1] * len(perms) + [-1]
            shape[k] = shape_of[k]
            for x, v in sums.items():
                acc[x] = acc[x] + v.reshape(shape)
        out.append(acc)
    return out


def multicast_by_order(terms: OrderTerms, perms: tuple[list[tuple[int, ...]], ...],
                       rows: slice = slice(None)) -> dict:
    """``{(parent, X): entries}`` shaped like :func:`entries_by_order`'s, for every span whose
    multicast group spreads a halo loop (:meth:`Evaluator._multicast_entries
    <polymap.passes.counting.fastcount.Evaluator._multicast_entries>`)."""
    out = {}
    keepers = terms.ev.s.keepers
    for t in terms.nest.tensors:
        for parent in keepers(t.name)[:-1]:
            span = (parent, t.name)
            if not terms.groups(span):
                continue
            child = next(c for c in keepers(t.name) if c > parent)
            acc = {x: v.reshape((1,) * len(perms) + (-1,)) for x, v in terms.first(child, rows, span).items()}
            for k in range(child):
                sums = terms.level_sums(k, perms[k], child, rows, span)
                shape = [1] * len(perms) + [-1]
                shape[k] = len(perms[k])
                for x, v in sums.items():
                    acc[x] = acc[x] + v.reshape(shape)
            out[span] = acc
    return out
