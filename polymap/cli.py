"""The ``polymap`` command: argument parsing and dispatch, nothing else.

Every subcommand lives in :mod:`polymap.commands` as ``main(args) -> int``
over the Python API; this module only knows their options (``cli.md``) and
turns errors into exit statuses: 2 for bad input, 1 for a "no".
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import shlex
import sys

from polymap.budget import Budget
from polymap.errors import InputError, PolymapError, Refusal
from polymap.limits import parse_limits

COMMANDS = ("show", "run", "deps", "check", "cost", "transform", "compile", "search", "arch", "calibrate", "report",
            "import")

#: Commands whose module name differs (``import`` is a Python keyword).
_MODULES = {"import": "import_files"}


def _common(p: argparse.ArgumentParser, *, file: bool = True) -> None:
    if file:
        p.add_argument("file", help="a .loop file, or a .c file with a #pragma scop region")
        p.add_argument("--cpp", default="", metavar="FLAGS",
                       help="extra C preprocessor flags for a .c file (e.g. \"-I DIR -DN=64\")")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="set a parameter (repeatable)")
    p.add_argument("--kernel", help="the kernel to act on (default: all)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a report")
    p.add_argument("--budget", dest="budget_seconds", type=float, default=Budget().seconds, metavar="SECONDS",
                   help="time allowed for the analyses (default %(default)g s); past it, exit 2 with the reason")
    p.add_argument("--limit", dest="limit_texts", action="append", default=[], metavar="NAME=VALUE",
                   help="raise a limit of polymap.limits (file_bytes, npz_bytes, yaml_depth, nest_depth, "
                        "statements, domain_pieces, max_integer); repeatable")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="polymap", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("show", help="the polyhedral model")
    _common(p)
    p.add_argument("--emit", choices=("model", "loop"), default="model",
                   help="'loop' prints the kernels in the .loop language (for a C file)")

    p = sub.add_parser("run", help="run a kernel on arrays from an .npz file")
    _common(p)
    p.add_argument("--inputs", required=False, help="IN.npz with every in/inout tensor")
    p.add_argument("-o", "--output", required=False, help="OUT.npz for every out/inout tensor")
    p.add_argument("--target", choices=("reference", "c", "numpy"), default="reference")
    p.add_argument("--arch", default="host")
    p.add_argument("--mapping")

    p = sub.add_parser("deps", help="exact dependences and loop classes")
    _common(p)
    p.add_argument("--memory-based", action="store_true", help="all pairs of conflicting accesses")
    p.add_argument("--plot", metavar="OUT.png", help="draw a 2-D iteration space with dependences")
    p.add_argument("--loops", metavar="I,J", help="the two loops to plot (default: the two innermost)")
    p.add_argument("--fix", action="append", default=[], metavar="LOOP=VALUE",
                   help="value of a loop not plotted (repeatable)")
    p.add_argument("--statement", help="statement to plot (default: the deepest)")
    p.add_argument("--window", type=int, default=8, metavar="N",
                   help="draw at most the first N values of each plotted loop (default 8)")
    p.add_argument("--dot", metavar="OUT.dot", help="write the statement dependence graph as DOT")

    p = sub.add_parser("check", help="is a loop order or a mapping legal?")
    _common(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--order", help="loop order outer->inner, e.g. i,k,j")
    g.add_argument("--mapping", help="a mapping YAML file")
    p.add_argument("--arch", default=None, help="architecture (preset name or YAML file)")
    p.add_argument("--suggest", metavar="OUT.yaml", default=None,
                   help="write the mapping file of the suggested skew (for the --arch, default host)")

    p = sub.add_parser("cost", help="exact traffic, energy and cycles of a mapping")
    _common(p)
    p.add_argument("--arch", required=True)
    p.add_argument("--mapping", required=True)
    p.add_argument("--symbolic", action="store_true", help="also give each count as a formula")
    p.add_argument("--plot", metavar="ROOFLINE.png", help="place the mapping on the roofline")
    p.add_argument("--convention", choices=("exact", "timeloop"), default="exact",
                   help="'timeloop': outputs start at zero, spatial_reduction levels combine partial sums")
    p.add_argument("--export", nargs=2, metavar=("FORMAT", "OUT.yaml"),
                   help="also write the mapping in another tool's format: --export timeloop OUT.yaml")

    p = sub.add_parser("transform", help="the mapped loop nest in the .loop language")
    _common(p)
    p.add_argument("--mapping", required=True)
    p.add_argument("--arch", default=None)

    p = sub.add_parser("compile", help="tiled C and NumPy code, verified")
    _common(p)
    p.add_argument("--arch", default="host")
    p.add_argument("--mapping")
    p.add_argument("-o", "--output-dir", default="out")
    p.add_argument("--target", default="c,numpy", help="comma-separated: c, numpy")
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--verify-full", action="store_true",
                   help="also verify at the sizes compiled for (default: reduced sizes exercising every tile edge)")
    p.add_argument("--reassociate", action="store_true",
                   help="let floating-point reductions add in another order and contract multiply-adds (FMA): "
                        "faster, rounded differently from the original program")
    p.add_argument("--tune", type=int, default=0, metavar="K",
                   help="build and time the model's best K candidates per nest; keep the fastest")
    p.add_argument("--no-cache", action="store_true", help="neither use nor store remembered tuned choices")

    p = sub.add_parser("calibrate", help="measure this machine and write a fitted architecture file")
    _common(p, file=False)
    p.add_argument("--arch", default="host", help="the architecture to start from (default: host)")
    p.add_argument("-o", "--output", required=True, metavar="ARCH.yaml", help="the architecture file to write")

    p = sub.add_parser("import", help="read another tool's files (Timeloop) into polymap's")
    p.add_argument("format", choices=("timeloop",), help="the tool whose files these are")
    p.add_argument("problem", metavar="PROBLEM.yaml")
    p.add_argument("arch", metavar="ARCH.yaml")
    p.add_argument("mapping", nargs="?", metavar="MAPPING.yaml")
    p.add_argument("-o", "--output-dir", required=True, metavar="DIR")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a report")

    p = sub.add_parser("report", help="one self-contained HTML page per kernel, for reading and teaching")
    _common(p)
    p.add_argument("--arch", default="host")
    p.add_argument("--mapping")
    p.add_argument("-o", "--output", required=True, metavar="REPORT.html")
    p.add_argument("--loops", metavar="I,J", help="the two loops of the iteration-space picture")
    p.add_argument("--fix", action="append", default=[], metavar="LOOP=VALUE",
                   help="value of a loop not drawn (repeatable)")
    p.add_argument("--statement", help="the statement of the picture (default: the deepest)")

    p = sub.add_parser("search", help="search the mapspace: the best legal, fitting mappings")
    _common(p)
    p.add_argument("--arch", required=True)
    p.add_argument("--top", type=int, default=5, help="mappings to print per nest (default 5)")
    p.add_argument("--objective", choices=("energy", "cycles", "edp"), default="energy")
    p.add_argument("--evaluations", type=int, default=5_000_000, metavar="N",
                   help="work budget: mappings evaluated per nest at most (default 5,000,000)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--workers", type=int, help="local worker processes (default: the cores)")
    g.add_argument("--scheduler", metavar="ADDRESS", help="a Dask distributed scheduler, tcp://HOST:PORT")
    p.add_argument("--csv", metavar="ALL.csv", help="write every evaluated mapping with its counts")
    p.add_argument("--tune", type=int, default=0, metavar="K",
                   help="build and time the best K mappings per nest on this machine; report both rankings")

    p = sub.add_parser("arch", help="show an architecture (preset or file)")
    _common(p, file=False)
    p.add_argument("name", nargs="?", help="preset name or YAML file")
    p.add_argument("--list", action="store_true", help="list the presets")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit status (0 yes, 1 no, 2 bad input).

    The command's standard output is gathered and written once at the end, so
    that an unwritable output (a full device, a closed pipe) is one answer
    here, not an ``OSError`` wherever a command happened to print.
    """
    real = sys.stdout
    gathered = io.StringIO()
    with contextlib.redirect_stdout(gathered):
        status = _run(argv)
    return _write_output(real, gathered.getvalue(), status)


def _write_output(stream, text: str, status: int) -> int:
    if not text:
        return status
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:  # the reader (`| head`) went away: not an error of ours
        _silence_stdout()
        return 141
    except OSError as exc:
        print(f"error: cannot write the standard output: {exc.strerror or exc}", file=sys.stderr)
        _silence_stdout()
        return 2
    return status


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage error
        return 0 if exc.code == 0 else 2
    # what generated files say produced them
    args.command_line = "polymap " + shlex.join(str(a) for a in (sys.argv[1:] if argv is None else argv))
    try:
        seconds = getattr(args, "budget_seconds", Budget().seconds)
        if not seconds >= 0:
            raise InputError(f"--budget {seconds:g}: expected a number of seconds >= 0")
        args.budget = Budget(seconds=seconds)
        args.limits = parse_limits(getattr(args, "limit_texts", []))
        module = importlib.import_module(f"polymap.commands.{_MODULES.get(args.command, args.command)}")
        with args.budget.watch(f"polymap {args.command}"):
            return int(module.main(args) or 0)
    except PolymapError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_status
    except Refusal as exc:
        try:
            if getattr(args, "json", False) and exc.payload:
                import json

                print(json.dumps(exc.payload, indent=2))
            else:
                print(exc.message, file=sys.stderr)
        except BrokenPipeError:
            _silence_stdout()
        return exc.exit_status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader (`| head`) went away: not an error of ours, and no traceback
        _silence_stdout()
        return 141


def _silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def entry() -> None:
    """Console-script entry point."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        status = 141
    sys.exit(status)
