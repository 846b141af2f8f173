"""``polymap report FILE [--arch ARCH] [--mapping M.yaml] -o REPORT.html``: a page to read and teach from.

One self-contained HTML file (inline SVG and CSS, no network), one section per
selected kernel, written by :func:`polymap.api.report`; prints ``wrote FILE``.
"""
from __future__ import annotations

import argparse
import json
import sys

from polymap import api
from polymap.commands.common import parse_fixes
from polymap.driver import check_defines, load_program, parse_defines, select_kernels
from polymap.errors import InputError


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file, cpp=args.cpp)
    kernels = select_kernels(program, args.kernel)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    loops = None
    if args.loops:
        loops = tuple(x.strip() for x in args.loops.split(","))
        if len(loops) != 2:
            raise InputError(f"--loops {args.loops}: name exactly two loops, e.g. --loops i,j")
    page = api.report(kernels, arch=args.arch, mapping=args.mapping, params=defines, loops=loops,
                      fixed=parse_fixes(args.fix), statement=args.statement, title=f"polymap report: {args.file}")
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
