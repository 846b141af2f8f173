"""``polymap calibrate [--arch host] -o ARCH.yaml``: measure this machine, fit the model, write an architecture.

::

    $ polymap calibrate -o host.yaml
    measured bandwidth (elements/cycle, all instances):  DRAM 2.1  LLC 9.8  L2 31  L1 70
    measured compute: 48 FMA lanes/cycle (1.5 per unit)
    fitted derating:  compute 6.1  DRAM 1.0  LLC 1.3  L2 1.0  L1 2.2
    model error over 9 calibration kernels (median |log(measured/predicted)|, Spearman):
      before 2.31, 0.52     after 0.35, 0.78
    wrote host.yaml (polymap ... --arch host.yaml)
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import yaml

from polymap import api
from polymap.codegen.timing import ProcessTimer, timing_environment
from polymap.commands.common import progress_printer
from polymap.passes.counting.execution import BARRIER_CYCLES, FORK_CYCLES
from polymap.errors import InputError

HEADER = """\
# Written by `polymap calibrate` from measurements of this machine.
# Measured: each level's bandwidth (a streaming read sized to the level, all threads) and the
# compute rate (FMA chains in vector registers), then divided by the derating factor fitted
# to the calibration kernels (least squares in log space): {factors}.
# Measured, not derated: the team's start and a barrier (compute.team_start_cycles, barrier_cycles;
# with the assumed rates, the starting architecture's).
# The rates derated: {rates}.
# Read from the OS: capacities, instances, clock. Assumed (not measured): every energy.
"""


_RATES = {"measured": "the measured ones above",
          "assumed": "the starting architecture's assumed ones (they predicted the held-out calibration "
                     "kernels better than the measured ones: a busy machine?)"}


def main(args: argparse.Namespace) -> int:
    out = Path(args.output)
    if out.exists() and out.is_dir():
        raise InputError(f"-o {out}: is a directory; give the architecture file to write")
    # idle OpenMP threads sleep (this process's streaming and FMA loops too): see timing_environment
    os.environ.update(timing_environment(os.environ))
    result = api.calibrate(arch=args.arch, timer=ProcessTimer(dict(os.environ)), progress=progress_printer())
    arch = result.architecture
    factors = ", ".join(f"{n} {f:.3g}" for n, f in result.factors)
    try:
        out.write_text(HEADER.format(factors=factors, rates=_RATES[result.rates]) + yaml.safe_dump(arch.to_dict(), sort_keys=False))
    except OSError as exc:
        raise InputError(f"-o {out}: cannot write: {exc.strerror or exc}") from None
    if args.json:
        print(json.dumps(_document(result, out), indent=2))
        return 0
    bw = "  ".join(f"{n} {v:.3g}" for n, v in result.bandwidths.per_level)
    fmas = result.bandwidths.fma_per_cycle
    units = arch.compute.instances
    print(f"measured bandwidth (elements/cycle, all instances):  {bw}")
    print(f"measured compute: {fmas:.3g} FMA lanes/cycle ({fmas / units:.3g} per unit of {units})")
    bw_ = result.bandwidths
    if bw_.team_cycles is not None:
        print(f"measured bare team start {bw_.team_cycles:.3g} cycles, barrier {bw_.barrier_cycles:.3g} "
              f"(the model assumes {FORK_CYCLES:.3g} and {BARRIER_CYCLES:.3g}; the file keeps the measured ones "
              f"unless it derates the assumed rates: design.md)")
    print(f"fitted derating (> 1: the model was optimistic):  {factors}")
    print(f"model error over {len(result.samples)} calibration kernels "
          "(median |log(measured/predicted)|, Spearman's rho):")
    print(f"  before {_f(result.error_before)}, {_f(result.spearman_before)}     "
          f"after {_f(result.error_after)}, {_f(result.spearman_after)}")
    print(f"  ranking of each kernel's candidates (mean Spearman within a kernel): "
          f"before {_f(result.ranking_before)}, after {_f(result.ranking_after)}")
    ridge = "none: one common factor (no per-term fit ranked better)" if result.ridge is None else f"{result.ridge:g}"
    print(f"held out (each kernel predicted by a fit to the others; ridge {ridge}): error "
          f"{_f(result.held_out[0])}, Spearman within a kernel {_f(result.held_out[1])} "
          f"(one common factor: {_f(result.held_out_without[0])}, {_f(result.held_out_without[1])})")
    if result.rates == "assumed":
        print(f"  the factors derate {args.arch}'s assumed rates: they predicted the held-out kernels better "
              f"(error {_f(result.held_out[0])}) than the measured ones ({_f(result.held_out_measured[0])}); "
              "is the machine busy?")
    print(f"wrote {out} (use it with --arch {out})")
    return 0


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _document(result: api.Calibration, out: Path) -> dict:
    return {"architecture": str(out),
            "bandwidth_elements_per_cycle": dict(result.bandwidths.per_level),
            "fma_per_cycle": result.bandwidths.fma_per_cycle,
            "team_start_cycles": {"measured": result.bandwidths.team_cycles, "assumed": FORK_CYCLES},
            "barrier_cycles": {"measured": result.bandwidths.barrier_cycles, "assumed": BARRIER_CYCLES},
            "factors": dict(result.factors),
            "error": {"before": result.error_before, "after": result.error_after},
            "spearman": {"before": result.spearman_before, "after": result.spearman_after},
            "spearman_within_kernels": {"before": result.ranking_before, "after": result.ranking_after},
            "ridge": result.ridge,
            "rates": result.rates,
            "held_out_measured_rates": {"error": result.held_out_measured[0],
                                        "spearman_within_kernels": result.held_out_measured[1]},
            "held_out": {"error": result.held_out[0], "spearman_within_kernels": result.held_out[1],
                         "error_common_factor": result.held_out_without[0],
                         "spearman_common_factor": result.held_out_without[1]},
            "samples": [{"kernel": s.label, "measured_s": s.measured_s, "predicted_before_s": s.predicted_before_s,
                         "terms": dict(s.terms)} for s in result.samples]}
