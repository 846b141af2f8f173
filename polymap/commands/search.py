"""``polymap search FILE --arch ARCH [--top N] [--objective cycles|energy|edp] [--workers N | --scheduler ADDR]
[--evaluations N] [--csv ALL.csv] [--json]``.

The mapspace search as a command (:func:`polymap.api.search_network`):
every nest of every selected kernel, legal fitting mappings ranked by exact
counts, the best ``N`` printed with their ISL-confirmed counts, lower bounds
per level, totals for a file with many kernels. Progress on standard error
when it is a terminal. ``--evaluations`` is the work budget (mappings
evaluated per nest); the search is deterministic in it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, Sequence

from polymap import api, ir
from polymap.machine.arch import Architecture
from polymap.codegen.timing import ProcessTimer, timing_environment
from polymap.commands.common import progress_printer
from polymap.driver import check_defines, load_program, parse_defines, select_kernels
from polymap.errors import InputError
from polymap.passes.counting.cost_model import Objective
from polymap.passes.search.mapsearch import Progress, SearchOptions
from polymap.passes.search.network import NetworkResult
from polymap.passes.search.tune import NestTuning, tuning_lines
from polymap.reports.search import search_json, search_text, write_csv


def _progress_printer() -> Callable[[str, Progress], None] | None:
    if not sys.stderr.isatty():
        return None

    def show(name: str, p: Progress) -> None:
        best = "-" if p.best is None else f"{p.best:.4g}"
        sys.stderr.write(f"\r{name}: evaluated {p.evaluated:,}/{p.total:,}, pruned {p.pruned:.3g}, "
                         f"best {best}, {p.rate:,.0f}/s   ")
        sys.stderr.flush()

    return show


def _tune(net: NetworkResult, kernels: Sequence[ir.Kernel], arch: Architecture,
          k: int) -> dict[tuple[str, int], NestTuning]:
    """The best ``k`` mappings of every nest built and timed (the other nests at their best)."""
    timer = ProcessTimer(timing_environment(os.environ))
    out = {}
    for layer in net.layers:
        found = layer.result.found[:k]
        if len(found) < 2:
            continue
        kernel = next(kn for kn in kernels if kn.name == layer.kernel)
        fixed = [other.result.best.mapping for other in net.layers
                 if other.kernel == layer.kernel and other.nest != layer.nest and other.result.best is not None]
        out[layer.kernel, layer.nest] = api.measure(
            kernel, [f.mapping for f in found], arch=arch, params=layer.params,
            predicted_s=[f.cost.seconds for f in found], sources=[f"search #{r}" for r in range(1, len(found) + 1)],
            fixed=fixed, timer=timer, progress=progress_printer())
    return out


def _print_tunings(tunings: dict) -> None:
    for (kernel, _), t in tunings.items():
        lines = tuning_lines(t)
        print(f"kernel {kernel} measured: " + lines[0])
        print("\n".join(lines[1:]))


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file)
    defines = parse_defines(args.defines)
    kernels = select_kernels(program, args.kernel)
    check_defines(program, kernels, defines)
    if args.top < 1 or (args.workers is not None and args.workers < 1):
        raise InputError("--top and --workers take a positive number")
    if args.evaluations is not None and args.evaluations < 1:
        raise InputError("--evaluations takes a positive number")
    if args.tune < 0:
        raise InputError("--tune takes a number of mappings (0 or more)")
    options = SearchOptions(objective=Objective.parse(args.objective), top=max(args.top, args.tune), max_evaluations=args.evaluations,
                            csv_rows=args.csv is not None)
    progress = _progress_printer()
    net = api.search_network(kernels, arch=args.arch, params=defines, options=options,
                             workers=args.workers, scheduler=args.scheduler, progress=progress)
    if progress is not None:
        sys.stderr.write("\n")
    arch = api.architecture(args.arch)
    if args.csv:
        with open(args.csv, "w", newline="") as out:
            rows = write_csv(net, arch, out)
        print(f"{rows:,} evaluated mappings written to {args.csv}", file=sys.stderr)
    tunings = _tune(net, kernels, arch, args.tune) if args.tune else {}
    if args.json:
        doc = search_json(net, arch)
        for entry in doc:  # the measurements go with the first entry of each nest, like "search"
            if (entry["kernel"], entry["nest"]) in tunings and entry["rank"] == 1:
                entry["tuning"] = tunings[entry["kernel"], entry["nest"]].to_json()
        print(json.dumps(doc, indent=2))
    else:
        print(search_text(net, arch))
        _print_tunings(tunings)
    return 0 if all(layer.result.found for layer in net.layers) else 1
