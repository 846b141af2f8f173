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
from typing import Callable

from polymap import api
from polymap.codegen.timing import ProcessTimer, timing_environment
from polymap.commands.common import progress_printer
from polymap.driver import check_defines, load_program, parse_defines, select_kernels
from polymap.errors import InputError
from polymap.passes.counting.cost_model import Objective
from polymap.passes.search.mapsearch import Progress, SearchOptions
from polymap.passes.search.tune import tuning_lines
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


def _print_tunings(tunings: dict) -> None:
    for (kernel, _), t in tunings.items():
        lines = tuning_lines(t)
        print(f"kernel {kernel} measured: " + lines[0])
        print("\n".join(lines[1:]))


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    defines = parse_defines(args.defines)
    kernels = select_kernels(program, args.kernel)
    check_defines(program, kernels, defines)
    if args.top < 1:
        raise InputError("--top takes a positive number")
    if args.evaluations is not None and args.evaluations < 1:
        raise InputError("--evaluations takes a positive number")
    options = SearchOptions(objective=Objective.parse(args.objective), top=args.top,
                            max_evaluations=args.evaluations, csv_rows=args.csv is not None)
    progress = _progress_printer()
    found = api.search_network(kernels, arch=args.arch, params=defines, options=options, workers=args.workers,
                               scheduler=args.scheduler, progress=progress, tune=args.tune,
                               timer=ProcessTimer(timing_environment(os.environ)), tune_progress=progress_printer())
    if progress is not None:
        sys.stderr.write("\n")
    net, tunings = found.network, found.tunings
    arch = api.architecture(args.arch)
    if args.csv:
        with open(args.csv, "w", newline="") as out:
            rows = write_csv(net, arch, out)
        print(f"{rows:,} evaluated mappings written to {args.csv}", file=sys.stderr)
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
