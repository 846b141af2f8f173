"""``polymap report FILE [--arch ARCH] [--mapping M.yaml] -o REPORT.html``: a page to read and teach from.

One self-contained HTML file (inline SVG and CSS, no network), one section per
selected kernel, written by :func:`polymap.api.report`; prints ``wrote FILE``.
Without ``--mapping`` each kernel is shown under the mapping ``compile`` chooses
(the same function and ``--objective``/``--search-evaluations`` options).
"""
from __future__ import annotations

import argparse
import json
import sys

from polymap import api
from polymap.commands.common import choice_options, parse_fixes, progress_printer
from polymap.driver import check_defines, load_program, parse_defines, select_kernels
from polymap.errors import InputError
from polymap.reports.html.facts import ReportOptions


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernels = select_kernels(program, args.kernel)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    loops = None
    if args.loops:
        loops = tuple(x.strip() for x in args.loops.split(","))
        if len(loops) != 2:
            raise InputError(f"--loops {args.loops}: name exactly two loops, e.g. --loops i,j")
    options = ReportOptions(loops=loops, fixed=parse_fixes(args.fix), statement=args.statement)
    page = api.report(kernels, arch=args.arch, mapping=args.mapping, params=defines, options=options,
                      choice=choice_options(args), title=f"polymap report: {args.file}",
                      progress=progress_printer(), budget=args.budget)
    try:
        with open(args.output, "w") as f:
            f.write(page)
    except OSError as exc:
        raise InputError(f"-o {args.output}: cannot write: {exc.strerror or exc}") from None
    if args.json:
        print(json.dumps({"report": args.output, "kernels": [k.name for k in kernels]}, indent=2))
    else:
        print(f"wrote {args.output} ({', '.join(k.name for k in kernels)})", file=sys.stdout)
    return 0
