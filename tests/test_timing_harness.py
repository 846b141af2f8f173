"""The timing harness's own reproducibility: where the arrays lie, and the CPU time of a thread team.

Nothing here times a kernel: placement is checked on addresses, the team's CPU clock against each
thread's own clock, and the critical path on given readings.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from polymap.codegen.c.emitter import emit_c
from polymap.codegen.timing import critical_cpu, prepared_run, team_cpu_seconds
from polymap.driver import load_program, param_values
from polymap.tensors import PAGE_BYTES, STAGGER_BYTES, allocate

EXAMPLES = Path(__file__).parent.parent / "examples"


@pytest.fixture(scope="module")
def gemm():
    return load_program(EXAMPLES / "gemm.loop").kernels[0]


@pytest.mark.parametrize("n", [1, 7, 512, 1000])
def test_staggered_arrays_lie_at_fixed_distinct_page_offsets(gemm, n):
    """The k-th declared tensor starts k * 1088 bytes (mod 4 KiB) past a page boundary, whatever the
    allocator did before; zeroed, C-contiguous, writable, of the declared shape and dtype."""
    values = param_values(gemm, {"M": n, "N": n + 1, "K": 3})
    plain = allocate(gemm, values)
    junk = [np.empty(s) for s in (17, 4099, 300_001)]  # the allocator's history differs between calls
    store = allocate(gemm, values, staggered=True)
    del junk
    offsets = [store[d.name].ctypes.data % PAGE_BYTES for d in gemm.decls]
    assert offsets == [k * STAGGER_BYTES % PAGE_BYTES for k in range(len(gemm.decls))]
    assert len(set(offsets)) == len(offsets)
    for d in gemm.decls:
        a, b = store[d.name], plain[d.name]
        assert a.shape == b.shape and a.dtype == b.dtype and not a.any()
        assert a.flags.c_contiguous and a.flags.writeable


def test_prepared_run_keeps_the_placement_and_the_inputs(gemm):
    """The random inputs are copied into the placed arrays (a fresh copy would be NumPy's placement),
    and the kernel runs on them: C = A @ B."""
    values = param_values(gemm, {"M": 9, "N": 33, "K": 5})
    fn, pristine, tensors = prepared_run(gemm, emit_c(gemm, params=dict(values)), values, seed=3)
    for k, d in enumerate(gemm.decls):
        assert tensors[d.name].ctypes.data % PAGE_BYTES == k * STAGGER_BYTES % PAGE_BYTES
    np.testing.assert_array_equal(tensors["A"], pristine["A"])
    fn.call_here(tensors, values)
    np.testing.assert_allclose(tensors["C"], pristine["A"].astype(np.float64) @ pristine["B"], rtol=1e-5)


def test_team_cpu_seconds_reads_a_sleeping_threads_own_clock():
    """Another thread's CPU time, read from /proc while it sleeps, is what its own clock said."""
    burnt, own, wake = threading.Event(), [], threading.Event()

    def worker():
        start = time.thread_time()
        while time.thread_time() - start < 0.05:
            pass
        own.append((threading.get_native_id(), time.thread_time()))
        burnt.set()
        wake.wait()

    t = threading.Thread(target=worker)
    t.start()
    burnt.wait()
    time.sleep(0.01)  # asleep in wake.wait() by now
    reading = team_cpu_seconds()
    wake.set()
    t.join()
    tid, seconds = own[0]
    assert threading.get_native_id() in reading
    if tid in reading:  # Linux: every thread of the process
        assert seconds >= 0.05 and reading[tid] == pytest.approx(seconds, abs=2e-3)


def test_critical_cpu_is_the_busiest_threads_share():
    """The largest per-thread increase; a thread born between the readings counts from zero."""
    assert critical_cpu({1: 1.0, 2: 5.0}, {1: 1.5, 2: 5.2}) == pytest.approx(0.5)
    assert critical_cpu({1: 1.0}, {1: 1.1, 7: 0.3}) == pytest.approx(0.3)
    assert critical_cpu({}, {}) == 0.0
