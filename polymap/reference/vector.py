"""Whole loops at once: the fast path of the reference execution.

A :class:`Region` is a loop of the original program with everything inside
it. At run time (concrete parameters and enclosing iterators) it enumerates
every statement instance of the loop as integer NumPy arrays, evaluates all
subscripts, and runs the loop *statement by statement* (each statement over
all its instances at once) only when that provably gives the sequential
result on these very indices; otherwise it says no and the caller runs the
loop instance by instance. No static analysis is involved::

    for j in 0..N { init: C[i, j] = 0                  init  over all j     (distinct targets)
      for k in 0..K { acc: C[i, j] += A[i,k]*B[k,j] }}  -> acc over all (j, k): per C element,
                                                         the K terms folded in order of k

Exactness, on the concrete instances (see :mod:`polymap.reference.plan`):

* each statement either writes pairwise distinct elements and reads no
  element another instance of it writes (then all right-hand sides are
  computed first, element-wise, and stored), or is a reduction ``T[..] op=``
  whose right-hand side reads none of the elements it updates (then each
  element's terms are folded sequentially in instance order);
* for two statements, every conflicting pair of instances (same element, a
  write among them) is ordered in the original program the way distribution
  orders it: the textually first statement's instance first.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from polymap import ir
from polymap.reference.plan import StatementInstances, plan_region
from polymap.reference.vector_tree import StmtNode, compile_tree
from polymap.reference.vector_values import Fallback, store_values, vcast, vop
from polymap.reference.values import common
from typing import Callable

#: At most this many statement instances are held as arrays at once (~100 bytes each).
MAX_INSTANCES = 1 << 20
#: Fewer instances than this run faster one by one (the checks cost ~100 µs).
MIN_INSTANCES = 48
#: A loop whose attempts failed this often, never succeeding, stops trying.
GIVE_UP_AFTER = 8


@dataclass
class Region:
    """One loop of the program, run whole on arrays when that is exact (see the module doc)."""

    loop: ir.Loop
    ctx: object
    tree: tuple | None = field(init=False, default=None)
    failures: int = field(init=False, default=0)
    successes: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        try:
            self.tree = compile_tree((self.loop,), self.ctx.dtypes)
        except Fallback:
            self.tree = None
        self.flat = {name: a.reshape(-1) for name, a in self.ctx.store.items()}
        assert all(np.shares_memory(self.flat[n], a) or a.size == 0
                   for n, a in self.ctx.store.items()), "tensors must be contiguous"

    def run(self, env: dict) -> bool:
        """Run the loop for ``env`` on arrays and return True, or do nothing and return False."""
        if self.tree is None or (self.failures >= GIVE_UP_AFTER and not self.successes):
            return False
        try:
            plan = plan_region(self.tree, env, self.ctx, MAX_INSTANCES, MIN_INSTANCES)
        except Fallback:  # these indices cannot run whole: the scalar path runs them
            return self._failed()
        if plan is None:
            return False
        undo: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        try:
            for s in plan.statements:
                self._execute(s, undo)
        except Fallback:
            for flat, idx, old in reversed(undo):
                flat[idx] = old
            return self._failed()
        self.successes += 1
        env.update(plan.last_values)
        return True

    def _failed(self) -> bool:
        self.failures += 1
        return False

    def _execute(self, s: StatementInstances, undo: list) -> None:
        node: StmtNode = s.node
        flat = self.flat[node.stmt.target.tensor]
        loads = [self.flat[r.tensor][f] for r, f in zip(node.refs, s.read_flats)]
        value = node.value.fn(s.venv, loads)
        targets, n, dtype = s.target_flat, s.n, node.dtype
        if node.combine is None:
            new = store_values(value, node.value.type, dtype, n)
            undo.append((flat, targets, flat[targets]))
            flat[targets] = new
            return
        t = common(dtype, node.value.type)
        terms = np.broadcast_to(vcast(value, node.value.type, t), (n,))
        op = vop(node.combine, t)

        def step(acc: np.ndarray, v: np.ndarray) -> np.ndarray:  # t = t OP v, stored back into the tensor's dtype
            return store_values(op(vcast(acc, dtype, t), v), t, dtype, len(acc))

        if s.groups is None:  # distinct targets: one step each
            new = step(flat[targets], terms)
            undo.append((flat, targets, flat[targets]))
            flat[targets] = new
            return
        keys, order, counts = s.groups
        ordered = terms if order is None else terms[order]
        acc = np.array(flat[keys])
        if counts.min() == counts.max():
            acc = _fold_rectangular(acc, ordered.reshape(len(keys), -1), node.combine, t, dtype, step)
        else:
            starts = np.cumsum(counts) - counts
            for c in range(int(counts.max())):
                live = counts > c
                acc[live] = step(acc[live], ordered[starts[live] + c])
        undo.append((flat, keys, flat[keys]))
        flat[keys] = acc


_ACCUMULATE = {"+": np.add, "-": np.subtract, "*": np.multiply}


def _fold_rectangular(acc: np.ndarray, terms: np.ndarray, op: str, t: str, dtype: str,
                      step: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """Fold each row of ``terms`` into ``acc`` in column order (a sequential recurrence).

    ``ufunc.accumulate`` is a recurrence ``r[:, c] = r[:, c-1] OP x[:, c]`` by
    definition (unlike ``sum``, which adds pairwise), so it is exact whenever
    no conversion happens between steps.
    """
    ufunc = _ACCUMULATE.get(op) or (np.true_divide if op == "/" and t in ("f32", "f64") else None)
    if ufunc is not None and t == dtype and terms.shape[1] > 4:
        rows = np.concatenate([acc[:, None], terms], axis=1)
        return ufunc.accumulate(rows, axis=1, dtype=rows.dtype)[:, -1]
    for c in range(terms.shape[1]):
        acc = step(acc, terms[:, c])
    return np.array(acc)
