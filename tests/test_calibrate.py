"""``polymap calibrate``: the derating fit on synthetic measurements, units, the written architecture."""
from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from polymap.machine.arch import architecture_from_dict
from polymap.machine.presets import load_architecture
from polymap.machine.calibrate import (
    FMA_CHAINS,
    Bandwidths,
    Sample,
    derated_architecture,
    fit,
    measure_bandwidths,
    measured_architecture,
    stream_sizes,
    term_names,
)
from polymap.machine.derating import fit_derating, predict


def test_fit_recovers_known_factors_when_every_term_binds_somewhere():
    rng = np.random.default_rng(7)
    truth = np.array([2.0, 0.5, 3.0, 1.5])
    terms = rng.uniform(1, 100, (40, 4))
    measured = np.max(terms * truth, axis=1)
    binding = set(np.argmax(terms * truth, axis=1))
    result = fit_derating(terms, measured)
    assert result.error_after < 1e-3 < result.error_before
    for t in binding:
        assert result.factors[t] == pytest.approx(truth[t], rel=1e-2)


def test_fit_is_a_least_squares_in_log_space():
    # compute 2x optimistic, L1 3x: the docstring's example
    fitted = fit_derating([[10, 2], [10, 40], [1, 50]], [20, 120, 150])
    assert fitted.factors == pytest.approx((2.0, 3.0), rel=1e-2)
    # noisy measurements: the fitted log error is no worse than any nearby choice of factors
    rng = np.random.default_rng(3)
    terms = rng.uniform(1, 50, (30, 3))
    measured = np.max(terms * [4.0, 1.0, 2.0], axis=1) * np.exp(rng.normal(0, 0.2, 30))
    fitted = fit_derating(terms, measured, ridge=0.0)

    def sse(f):
        return float(np.sum(np.log(predict(terms, f) / measured) ** 2))

    best = sse(fitted.factors)
    for delta in ([1.05, 1, 1], [0.95, 1, 1], [1, 1, 1.05], [1, 1, 0.95], [1.02, 1.02, 1.02]):
        assert best <= sse(np.array(fitted.factors) * delta) + 1e-9


def test_fit_refuses_nonsense():
    with pytest.raises(ValueError):
        fit_derating([[1.0, 2.0]], [0.0])
    with pytest.raises(ValueError):
        fit_derating([[1.0, 2.0], [1.0, 1.0]], [1.0])


class FakeProbe:
    """A machine whose every level streams at 1 element per ns and which does 10 FMA lanes per ns."""

    lanes = 16

    def __init__(self):
        self.streams = []

    def stream(self, elements: int, reps: int) -> float:
        self.streams.append(elements)
        return elements * reps * 1e-9

    def fma(self, iterations: int) -> float:
        return 2 * iterations * FMA_CHAINS * self.lanes / 10 * 1e-9

    def threads(self) -> int:
        return 2


def test_bandwidths_are_elements_per_cycle_at_the_clock():
    host = load_architecture("host")
    probe = FakeProbe()
    bw = measure_bandwidths(host, probe)
    f = host.compute.frequency
    for name, value in bw.per_level:
        assert value == pytest.approx(1e9 / f)  # 1 element per ns
    assert bw.fma_per_cycle == pytest.approx(10e9 / f)
    sizes = dict(stream_sizes(host))
    for lv in host.levels[1:]:
        if lv.name in sizes:  # half of the level (all its instances), in f32 elements
            assert sizes[lv.name] * 4 * 2 == lv.capacity_bytes * lv.instances
    assert sizes[host.levels[0].name] > max(v for k, v in sizes.items() if k != host.levels[0].name)


def test_fit_writes_an_architecture_that_predicts_the_fitted_times(tmp_path):
    toy = load_architecture("toy")
    bw = Bandwidths((("DRAM", 8.0), ("GLB", 32.0)), 16.0)
    measured = measured_architecture(toy, bw)
    names = term_names(measured)
    assert names == ("compute", "DRAM", "GLB")
    f = measured.compute.frequency
    truth = {"compute": 3.0, "DRAM": 1.0, "GLB": 2.0}
    rng = np.random.default_rng(0)
    samples = []
    for k in range(12):
        terms = dict(zip(names, rng.uniform(1e3, 1e5, 3)))
        seconds = max(truth[n] * terms[n] for n in names) / f
        samples.append(Sample(f"k{k}", tuple(terms.items()), seconds, max(terms.values()) / f / 5))
    result = fit(samples, measured, bw, name="toy-calibrated")
    assert result.error_after < 1e-3 and result.error_before > 1
    assert result.spearman_after == pytest.approx(1.0)
    factors = dict(result.factors)
    out = derated_architecture(measured, factors, name="x")
    assert out.levels[0].bandwidth == pytest.approx(8.0 / factors["DRAM"])
    assert out.compute.ops_per_cycle == pytest.approx(measured.compute.ops_per_cycle / factors["compute"])
    # the written file reads back with --arch, and predicts what was measured
    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump(result.architecture.to_dict(), sort_keys=False))
    back = load_architecture(str(path))
    assert back == architecture_from_dict(result.architecture.to_dict(), source_name="x")
    for s in samples:
        terms = dict(s.terms)
        cycles = [terms["compute"] * measured.compute.ops_per_cycle / back.compute.ops_per_cycle]
        cycles += [terms[lv.name] * measured.levels[k].bandwidth / lv.bandwidth
                   for k, lv in enumerate(back.levels) if lv.bandwidth is not None]
        assert math.log(max(cycles) / f / s.measured_s) == pytest.approx(0, abs=2e-3)
