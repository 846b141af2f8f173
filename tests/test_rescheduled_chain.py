"""The accumulation chain of a rescheduled mapping (``execution._rescheduled_chain``), against brute force.

A mapping with a ``schedule`` walks new loops (``s0, s1, ...``). Before, the cost model looked for an
update's chain along the statements' own loops only, so it saw none there: doitgen's isl schedule,
which walks ``sum[p] += A[r][q][s] * C4[s][p]`` in the original order (``s4 = p + s``), was charged no
latency while the original order and the interchange were, and won at reduced sizes (PolyBench
doitgen at LARGE: 1.05x against 8.1x for the interchange). Here the fact is recomputed without ISL:
enumerate the instances, evaluate the schedule's expressions, and look, innermost walked loop first,
for the first loop along which each accumulating statement moves (an instance one step further along
it, every other coordinate equal); the chain is charged when, for every such statement, every such step
keeps the update's target.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from bruteforce import instances
from polymap.driver import parse
from polymap.machine.presets import load_architecture
from polymap.mapping.model import mapping_loop_extents
from polymap.passes.counting.execution import _walk, effective_tiles, execution
from polymap.passes.frontend.rename import distinct_loop_names
from polymap.passes.search.isl_schedule import isl_mappings
from polymap.poly import build_model

ROOT = Path(__file__).resolve().parent.parent
HOST = load_architecture("host")
CASES = {"doitgen": {"NR": 3, "NQ": 2, "NP": 5}, "lu": {"N": 6}, "cholesky": {"N": 6},
         "durbin": {"N": 6}, "gramschmidt": {"M": 5, "N": 4}}


def _eval(text: str, values: dict[str, int]) -> int:
    return int(eval(text, {"__builtins__": {}}, dict(values)))  # test-only: isl's affine forms


def _brute_chain(kernel, mapping, params, walk) -> bool:
    entries = {e.statement: e for e in mapping.schedule}
    inst = instances(kernel, params, mapping.nest)
    coords = []
    updates: dict[str, bool] = {}  # a statement updates when every instance reads the element it writes
    for ctx, env, reads, write in inst:
        e = entries[ctx.name]
        coords.append((ctx, {x: _eval(t, {**params, **env}) for x, t in zip(e.loops, e.exprs)}, write))
        updates[ctx.name] = updates.get(ctx.name, True) and (ctx.stmt.is_reduction or write in reads)
    kept = []
    for name in sorted(n for n, u in updates.items() if u):
        mine = [(c, w) for ctx, c, w in coords if ctx.name == name]
        at = {tuple(sorted(c.items())): w for c, w in mine}
        for k, inner, _ in reversed(walk):
            wave = mapping.levels[k].wavefront
            pairs = []
            for c, w in mine:
                if inner not in c:
                    break
                nxt = dict(c)
                nxt[inner] += 1
                if len(wave) == 2 and wave[1] == inner and wave[0] in c:
                    nxt[wave[0]] -= 1
                later = at.get(tuple(sorted(nxt.items())))
                if later is not None:
                    pairs.append((w, later))
            if not pairs:
                continue  # it does not move along this loop
            kept.append(all(a == b for a, b in pairs))
            break
    return bool(kept) and all(kept)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_chain_of_a_rescheduled_mapping_equals_brute_force(name):
    kernel = distinct_loop_names(parse((ROOT / "examples" / "polybench" / f"{name}.loop").read_text(),
                                       f"{name}.loop").kernels[0])
    model = build_model(kernel)
    params = CASES[name]
    seen = 0
    for source, m in isl_mappings(model, 0, HOST, params, to_count=False):
        extents = mapping_loop_extents(kernel, m, params, model=model)
        walk = _walk(m, effective_tiles(m, extents))
        ex = execution(model, m, HOST, extents)
        assert (ex.chains is not None) == _brute_chain(kernel, m, params, walk), source
        seen += 1
    assert seen


def test_doitgen_isl_schedule_keeps_the_original_chain():
    """doitgen's isl candidates walk ``sum[p]`` along ``s`` as the original does (brute force above):
    both are charged the one accumulator in flight."""
    kernel = distinct_loop_names(parse((ROOT / "examples" / "polybench" / "doitgen.loop").read_text(),
                                       "doitgen.loop").kernels[0])
    model = build_model(kernel)
    params = CASES["doitgen"]
    found = isl_mappings(model, 0, HOST, params, to_count=False)
    assert found
    for _source, m in found:
        ex = execution(model, m, HOST, mapping_loop_extents(kernel, m, params, model=model))
        assert ex.chains == 1 and ex.latency > 1
