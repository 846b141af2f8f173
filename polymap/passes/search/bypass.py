"""Bypass in the mapspace: every keep plan, and an exact floor on the objective of each.

Before -> after (gemm on ``eyeriss``: GLB and RF each keep a subset of A, B, C)::

    FastNest, arch           ->  keep plans: 8 x 8 = 64, the all-kept one first
    keep plan, objective     ->  floor: no mapping with this binding scores below it

A keep plan changes no schedule (legality, orders and tiles are shared) but
moves where traffic goes, so no plan dominates another in general. What
prunes exactly is a floor on the objective that holds for *every* mapping of
the plan (any tiles, orders, spatial loops), from counts that do not depend
on them (``mapping.md``):

- at the innermost level keeping ``X``: reads = read references x instances
  and updates = write references x instances, exactly;
- at any other level keeping ``X``: at least one read (if ``X`` is filled,
  below) and one update (if written) per element of ``X`` the nest touches,
  since every element reaches the compute through it;
- at every keeping level below the backing store: fills >= elements (if ``X``
  is read and no initialisation plainly writes it: each element enters at
  least once, and every such entry is a fill), writebacks >= elements (if
  written);
- compute: instances; cycles: at least instances over every compute unit,
  and per level (reads + updates) over its bandwidth.

Energy and cycles are monotone in these counts (``cost_model``: non-negative
energies), so the floor of EDP is the product of the two floors. The search
evaluates the all-kept plans first; a plan whose floor exceeds the
``keep``-th best objective found so far cannot place a mapping among the
results, and is removed whole (``pruned["bypass floor"]``).
"""
from __future__ import annotations

from itertools import product

from polymap.machine.arch import Architecture
from polymap.passes.counting.cost_model import compute_cycles, compute_energy, level_cycles, level_energy
from polymap.passes.counting.fastcount_forms import image_size
from polymap.passes.counting.fastcount_nest import FastNest, TensorShape

KeepPlan = tuple[frozenset[str], ...]  # per level; level 0 (the backing store) keeps every tensor


def keep_plans(nest: FastNest, arch: Architecture) -> list[KeepPlan]:
    """Every binding: per level below the backing store, any subset of the tensors; all-kept first."""
    names = [t.name for t in nest.tensors]
    every = frozenset(names)
    subsets = [frozenset(x for x, bit in zip(names, bits) if bit)
               for bits in product((1, 0), repeat=len(names))]  # (1, 1, ...) first: every tensor
    return [(every,) + tuple(combo) for combo in product(subsets, repeat=len(arch.levels) - 1)]


def elements(nest: FastNest, t: TensorShape) -> int:
    """Elements of ``t`` the whole nest touches."""
    lengths = {x: nest.extents[x] for x in range(len(nest.loops))}
    out = 1
    for sub in t.subscripts:
        out *= int(image_size(sub, lengths))
    return out


def floor(nest: FastNest, arch: Architecture, keep: KeepPlan) -> tuple[float, float]:
    """``(energy pJ, cycles)`` that no mapping of ``nest`` with the binding ``keep`` goes below."""
    n, W = len(arch.levels), nest.instances
    reads_out = [0] * n  # per level: reads + writebacks (the energy's outgoing side)
    writes_in = [0] * n  # fills + updates
    crossing = [0] * n  # reads + updates
    for t in nest.tensors:
        size = elements(nest, t)
        keepers = [l for l in range(n) if t.name in keep[l]]
        # an initialisation's plain write can bring every element in without a fill
        filled = t.reads > 0 and not (t.init_writes > 0 and t.init_reads == 0)
        written = t.writes > 0 or t.init_writes > 0
        for i, l in enumerate(keepers):
            innermost = i == len(keepers) - 1
            reads = nest.read_events(t) if innermost else (size if filled else 0)
            updates = nest.write_events(t) if innermost else (size if written else 0)
            fills = size if (l > 0 and filled) else 0
            writebacks = size if (l > 0 and written) else 0
            reads_out[l] += reads + writebacks
            writes_in[l] += fills + updates
            crossing[l] += reads + updates
    energy = compute_energy(arch, W) + sum(level_energy(arch.levels[l], reads_out[l], writes_in[l]) for l in range(n))
    cycles = compute_cycles(arch, W, arch.compute.instances)
    for l in range(n):
        c = level_cycles(arch.levels[l], crossing[l])
        if c is not None:
            cycles = max(cycles, c)
    return float(energy), float(cycles)

