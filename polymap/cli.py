"""The ``polymap`` command: argument parsing and dispatch, nothing else.

Every subcommand lives in :mod:`polymap.commands` as ``main(args) -> int``:
it turns its flags into the options of :mod:`polymap.api`, calls one API
function and renders the result. This module knows the options (``cli.md``)
and turns errors into exit statuses: 2 for bad input, 1 for a "no", 3 for a
bug of polymap (one line naming the exception; the traceback with
``--debug``). With ``--json`` an error is the document
``{"error": {"message", "file", "line", "column"}}`` on standard output.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import shlex
import sys
import traceback
from typing import Any, NoReturn, Sequence

from polymap import __version__
from polymap.budget import Budget
from polymap.errors import InputError, PolymapError, Refusal
from polymap.limits import parse_limits
from polymap.passes.counting.cost_model import Objective
from polymap.passes.search.choice import ChoiceOptions
from polymap.passes.search.mapsearch import SearchOptions

COMMANDS = ("show", "run", "deps", "check", "cost", "transform", "compile", "search", "arch", "calibrate", "report",
            "import")

#: Commands whose module name differs (``import`` is a Python keyword).
_MODULES = {"import": "import_files"}

DESCRIPTION = """\
polymap models loop kernels written in the .loop language exactly (ISL): it
shows the polyhedral model, finds exact dependences, says whether a loop order
or mapping is legal (with a witness for every "no"), counts the exact data
movement of a mapping on a memory hierarchy, and writes tiled C and NumPy code
verified against a reference execution.

exit status: 0 yes, 1 a well-formed request whose answer is no (illegal order,
invalid mapping, failed verification), 2 bad input, 3 an internal error."""

REPORT_BUGS = "please report it with the command and the input files that caused it"


class UsageError(Exception):
    """argparse found a bad command line (exit 2)."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.usage = usage


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of exiting, so that ``--json`` can shape the error."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.format_usage())


def _common(p: argparse.ArgumentParser, *, file: bool = True) -> None:
    if file:
        p.add_argument("file", help="the kernel file: .loop, or .c with a #pragma scop region")
        p.add_argument("--cpp", default="", metavar="FLAGS",
                       help="extra C preprocessor flags for a .c file (e.g. \"-I DIR -DN=64\"; default: none)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="set a parameter, e.g. -D N=64 (repeatable; default: the values in the kernel header)")
    p.add_argument("--kernel", metavar="NAME", help="the kernel to act on (default: every kernel of the file)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the report")
    p.add_argument("--debug", action="store_true", help="on an internal error, print the traceback")
    p.add_argument("--budget", dest="budget_seconds", type=float, default=Budget().seconds, metavar="SECONDS",
                   help="time allowed for the analyses (default %(default)g s); past it, exit 2 with the reason")
    p.add_argument("--limit", dest="limit_texts", action="append", default=[], metavar="NAME=VALUE",
                   help="raise a limit of polymap.limits (file_bytes, npz_bytes, yaml_depth, nest_depth, "
                        "statements, domain_pieces, max_integer); repeatable (default: the limits of docs/design.md, "
                        "Robustness)")


def _choice(p: argparse.ArgumentParser) -> None:
    default = ChoiceOptions()
    p.add_argument("--objective", choices=tuple(o.value for o in Objective), default=default.objective.value,
                   help="what the choice of a mapping minimises (default: %(default)s; ties go to energy for "
                        "cycles, to cycles otherwise)")
    p.add_argument("--search-evaluations", type=int, default=default.search_evaluations, metavar="N",
                   help="tile vectors the mapping search evaluates per loop order; 0 leaves the search out "
                        "(default: %(default)s)")


def _sub(sub: Any, name: str, summary: str, description: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=summary, description=description,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="polymap", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"polymap {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)

    p = _sub(sub, "show", "the polyhedral model", "Print each kernel's polyhedral model: parameters, tensors, "
             "and per statement its domain, original schedule and accesses.")
    _common(p)
    p.add_argument("--emit", choices=("model", "loop"), default="model",
                   help="'loop' prints the kernels in the .loop language (for a C file; default: %(default)s)")

    p = _sub(sub, "run", "run a kernel on arrays from an .npz file",
             "Run a kernel on your arrays: the reference execution of the original program, or the generated "
             "C or NumPy code for a mapping (without --mapping, the mapping compile would choose).")
    _common(p)
    p.add_argument("--inputs", metavar="IN.npz", help="one array per in/inout tensor, by name (needed when the "
                   "kernel reads any; default: none)")
    p.add_argument("-o", "--output", metavar="OUT.npz", help="write every out/inout tensor here (default: write "
                   "nothing, print a summary)")
    p.add_argument("--target", choices=("reference", "c", "numpy"), default="reference",
                   help="what runs (default: %(default)s)")
    p.add_argument("--arch", default="host", help="architecture for c/numpy: a preset (host, toy, eyeriss) or a "
                   "YAML file (default: %(default)s)")
    p.add_argument("--mapping", metavar="M.yaml", help="mapping file, or compile's NAME.json, for c/numpy "
                   "(default: the mapping compile would choose)")
    _choice(p)

    p = _sub(sub, "deps", "exact dependences and loop classes",
             "Exact dependences of the original program, their distances and carrying loops, and which loops "
             "are parallel or reductions.")
    _common(p)
    p.add_argument("--memory-based", action="store_true",
                   help="every pair of conflicting accesses (default: value-based, the true dataflow)")
    p.add_argument("--plot", metavar="OUT.png", help="draw a 2-D iteration space with its dependences (default: none)")
    p.add_argument("--loops", metavar="I,J", help="the two loops to plot (default: the two innermost)")
    p.add_argument("--fix", action="append", default=[], metavar="LOOP=VALUE",
                   help="value of a loop not plotted (repeatable; default: its first value)")
    p.add_argument("--statement", help="statement to plot (default: the deepest)")
    p.add_argument("--window", type=int, default=8, metavar="N",
                   help="draw at most the first N values of each plotted loop (default 8)")
    p.add_argument("--dot", metavar="OUT.dot", help="write the statement dependence graph as DOT (default: none)")

    p = _sub(sub, "check", "is a loop order or a mapping legal?",
             "Is a loop order or a mapping legal? Exit 0 when it is, 1 with a concrete witness per violation.")
    _common(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--order", metavar="I,K,J", help="loop order, outer to inner, e.g. i,k,j (this or --mapping)")
    g.add_argument("--mapping", metavar="M.yaml", help="a mapping file, or compile's NAME.json (this or --order)")
    p.add_argument("--arch", default=None, help="architecture (preset or YAML file) to check fan-out and "
                   "capacities against (default: the preset whose level names the mapping uses)")
    p.add_argument("--suggest", metavar="OUT.yaml", default=None,
                   help="write the mapping file of the suggested skew (for the --arch; default: host)")

    p = _sub(sub, "cost", "exact traffic, energy and cycles of a mapping",
             "Exact fills, writebacks, reads and updates per level and tensor, then energy, cycles, the "
             "bottleneck, utilization and intensity. A mapping that does not fit is refused (exit 1).")
    _common(p)
    p.add_argument("--arch", required=True, help="architecture: a preset (host, toy, eyeriss) or a YAML file")
    p.add_argument("--mapping", required=True, metavar="M.yaml", help="a mapping file, or compile's NAME.json")
    p.add_argument("--symbolic", action="store_true", help="also give each count as a formula in the parameters "
                   "(refused when the --budget runs out)")
    p.add_argument("--plot", metavar="ROOFLINE.png", help="place the mapping on the roofline (default: none)")
    p.add_argument("--convention", choices=("exact", "timeloop"), default="exact",
                   help="'timeloop': outputs start at zero, spatial_reduction levels combine partial sums "
                        "(default: %(default)s)")
    p.add_argument("--export", nargs=2, metavar=("FORMAT", "OUT.yaml"),
                   help="also write the mapping in another tool's format: --export timeloop OUT.yaml "
                        "(default: none)")

    p = _sub(sub, "transform", "the mapped loop nest in the .loop language",
             "Print the mapped (tiled, permuted) nest as .loop source that parses again and computes the same "
             "results. An illegal mapping is refused (exit 1).")
    _common(p)
    p.add_argument("--mapping", required=True, metavar="M.yaml", help="a mapping file")
    p.add_argument("--arch", default=None, help="architecture: a preset or a YAML file (default: the one a "
                   "compile document names, or the preset whose level names the mapping uses)")

    p = _sub(sub, "compile", "tiled C and NumPy code, verified",
             "Write DIR/NAME.c, DIR/NAME.py and DIR/NAME.json (the mappings and their cost) per kernel, then "
             "run the code on random inputs against the reference execution (exit 1 on a mismatch).")
    _common(p)
    p.add_argument("--arch", default="host", help="architecture: a preset (host, toy, eyeriss) or a YAML file "
                   "(default: %(default)s, this machine)")
    p.add_argument("--mapping", metavar="M.yaml", help="a mapping file, or a NAME.json compile wrote (default: "
                   "choose the best legal, fitting mapping of every nest)")
    p.add_argument("-o", "--output-dir", default="out", metavar="DIR", help="where to write (default: %(default)s)")
    p.add_argument("--target", default="c,numpy", help="comma-separated targets to write and verify: c, numpy "
                   "(default: %(default)s)")
    p.add_argument("--no-verify", action="store_true", help="skip the comparison with the reference execution")
    _choice(p)
    p.add_argument("--verify-full", action="store_true",
                   help="also verify at the sizes compiled for (default: reduced sizes exercising every tile edge)")
    p.add_argument("--reassociate", action="store_true",
                   help="let floating-point reductions add in another order and contract multiply-adds (FMA): "
                        "faster, rounded differently from the original program (the NumPy target folds a pure "
                        "contraction, an output C += A * B nothing else reads, with one @ even without it)")
    p.add_argument("--tune", type=int, default=0, metavar="K",
                   help="build and time the model's best K candidates per nest; keep the fastest (default: 0, "
                        "no measuring)")
    p.add_argument("--no-cache", action="store_true", help="neither use nor store remembered tuned choices")

    p = _sub(sub, "calibrate", "measure this machine and write a fitted architecture file",
             "Measure this machine's bandwidths and compute rate, fit one derating factor per level over a set "
             "of calibration kernels, and write the fitted architecture (use it with --arch ARCH.yaml).")
    _common(p, file=False)
    p.add_argument("--arch", default="host", help="the architecture to start from (default: %(default)s)")
    p.add_argument("-o", "--output", required=True, metavar="ARCH.yaml", help="the architecture file to write")

    p = _sub(sub, "import", "read another tool's files (Timeloop) into polymap's",
             "Translate Timeloop v0.4 problem, architecture and (optional) mapping files into a .loop kernel, "
             "DIR/arch.yaml and DIR/mapping.yaml.")
    p.add_argument("format", choices=("timeloop",), help="the tool whose files these are")
    p.add_argument("problem", metavar="PROBLEM.yaml", help="Timeloop's problem file")
    p.add_argument("arch", metavar="ARCH.yaml", help="Timeloop's architecture file")
    p.add_argument("mapping", nargs="?", metavar="MAPPING.yaml", help="Timeloop's mapping file (default: none)")
    p.add_argument("-o", "--output-dir", required=True, metavar="DIR", help="where to write the files")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the report")
    p.add_argument("--debug", action="store_true", help="on an internal error, print the traceback")

    p = _sub(sub, "report", "one self-contained HTML page per kernel, for reading and teaching",
             "Write one self-contained HTML page: per kernel its dependences, an iteration-space picture, the "
             "legality of the mapping with its witness, the mapping as nested tiles, traffic, energy, the "
             "roofline and the generated C code.")
    _common(p)
    p.add_argument("--arch", default="host", help="architecture: a preset (host, toy, eyeriss) or a YAML file "
                   "(default: %(default)s)")
    p.add_argument("--mapping", metavar="M.yaml", help="a mapping file, or compile's NAME.json (default: the "
                   "mapping compile chooses)")
    _choice(p)
    p.add_argument("-o", "--output", required=True, metavar="REPORT.html", help="the page to write")
    p.add_argument("--loops", metavar="I,J", help="the two loops of the iteration-space picture (default: the "
                   "two innermost)")
    p.add_argument("--fix", action="append", default=[], metavar="LOOP=VALUE",
                   help="value of a loop not drawn (repeatable; default: its first value)")
    p.add_argument("--statement", help="the statement of the picture (default: the deepest)")

    searched = SearchOptions()
    p = _sub(sub, "search", "search the mapspace: the best legal, fitting mappings",
             "Search every nest of every kernel over its pruned mapspace, count each mapping exactly, and print "
             "the best with ISL-confirmed counts, the size of the space, what was pruned and lower bounds.")
    _common(p)
    p.add_argument("--arch", required=True, help="architecture: a preset (host, toy, eyeriss) or a YAML file")
    p.add_argument("--top", type=int, default=searched.top, help="mappings to print per nest (default: %(default)s)")
    p.add_argument("--objective", choices=tuple(o.value for o in Objective), default=searched.objective.value,
                   help="what the ranking minimises (default: %(default)s)")
    p.add_argument("--evaluations", type=int, default=searched.max_evaluations, metavar="N",
                   help="work budget: mappings evaluated per nest at most (default: %(default)s)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--workers", type=int, help="local worker processes (default: the cores)")
    g.add_argument("--scheduler", metavar="ADDRESS", help="a Dask distributed scheduler, tcp://HOST:PORT "
                   "(default: none, local processes)")
    p.add_argument("--csv", metavar="ALL.csv", help="write every evaluated mapping with its counts (default: none)")
    p.add_argument("--tune", type=int, default=0, metavar="K",
                   help="build and time the best K mappings per nest on this machine; report both rankings "
                        "(default: 0, no measuring)")

    p = _sub(sub, "arch", "show an architecture (preset or file)",
             "Show an architecture's levels, capacities, energies and bandwidths, or list the presets.")
    _common(p, file=False)
    p.add_argument("name", nargs="?", help="preset name (host, toy, eyeriss) or YAML file")
    p.add_argument("--list", action="store_true", help="list the presets and what each models")
    return parser


def error_document(message: str, file: str | None = None, line: int | None = None,
                   column: int | None = None) -> dict[str, Any]:
    """The ``--json`` form of an error (``cli.md``)."""
    return {"error": {"message": message, "file": file, "line": line, "column": column}}


def _error_json(exc: PolymapError) -> dict[str, Any]:
    message = "\n".join(x.message for x in exc.diagnostics)
    loc = exc.diagnostics[0].loc
    if loc is None:
        return error_document(message)
    line = loc.line if loc.line > 0 else None
    column = loc.col if loc.line > 0 else None
    return error_document(message, loc.filename, line, column)


def _print_json(doc: dict[str, Any]) -> None:
    print(json.dumps(doc, indent=2))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (0 yes, 1 no, 2 bad input, 3 internal error).

    The command's standard output is gathered and written once at the end, so
    that an unwritable output (a full device, a closed pipe) is one answer
    here, not an ``OSError`` wherever a command happened to print.
    """
    real = sys.stdout
    gathered = io.StringIO()
    with contextlib.redirect_stdout(gathered):
        status = _run(list(sys.argv[1:] if argv is None else argv))
    return _write_output(real, gathered.getvalue(), status)


def _write_output(stream: Any, text: str, status: int) -> int:
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


def _run(argv: list[str]) -> int:
    wants_json = "--json" in argv
    debug = "--debug" in argv
    try:
        try:
            args = build_parser().parse_args(argv)
        except UsageError as exc:
            print(exc.usage + f"polymap: error: {exc}", file=sys.stderr)
            if wants_json:
                _print_json(error_document(str(exc)))
            return 2
        except SystemExit as exc:  # --help and --version print and exit 0
            return 0 if exc.code in (0, None) else 2
        # what generated files say produced them
        args.command_line = "polymap " + shlex.join(str(a) for a in argv)
        return _dispatch(args)
    except BrokenPipeError:
        # the reader (`| head`) went away: not an error of ours, and no traceback
        _silence_stdout()
        return 141
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the last-resort handler of cli.md: a bug of polymap
        return _internal_error(exc, debug=debug, wants_json=wants_json)


def _internal_error(exc: Exception, *, debug: bool, wants_json: bool) -> int:
    """Exit 3: one line naming the exception (the traceback with ``--debug``)."""
    name = type(exc).__name__
    first = str(exc).splitlines()[0] if str(exc) else ""
    print(f"polymap: internal error: {name}{': ' + first if first else ''} ({REPORT_BUGS}"
          f"{'' if debug else '; --debug prints the traceback'})", file=sys.stderr)
    if debug:
        traceback.print_exc()
    if wants_json:
        _print_json(error_document(f"internal error: {name}: {first}"))
    return 3


def _dispatch(args: argparse.Namespace) -> int:
    """The command in a child process under the budget (:meth:`Budget.supervise`): a single ISL or
    NumPy call that outlives the deadline is stopped too, and the refusal says where it was."""
    try:
        seconds = getattr(args, "budget_seconds", Budget().seconds)
        if not seconds >= 0:
            raise InputError(f"--budget {seconds:g}: expected a number of seconds >= 0")
        args.budget = Budget(seconds=seconds)
        args.limits = parse_limits(getattr(args, "limit_texts", []))
        module = importlib.import_module(f"polymap.commands.{_MODULES.get(args.command, args.command)}")
        return args.budget.supervise(_execute, (module, args), what=f"polymap {args.command}")
    except PolymapError as exc:  # bad flags, or the budget ran out in the child
        return _render_error(args, exc)


def _execute(module: Any, args: argparse.Namespace) -> int:
    """One command, its errors turned into exit statuses (what runs in the supervised child)."""
    try:
        with args.budget.watch(f"polymap {args.command}"):
            if getattr(args, "file", None):  # until the command names a later stage
                args.budget.check(f"reading and checking {args.file}")
            return int(module.main(args) or 0)
    except PolymapError as exc:
        return _render_error(args, exc)
    except Refusal as exc:
        # "no" is the command's answer (like diff's differences): on standard output, as the JSON is
        if getattr(args, "json", False) and exc.payload:
            _print_json(exc.payload)
        else:
            print(exc.message)
        return exc.exit_status
    except BrokenPipeError:
        return 141
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the last-resort handler, here in the child
        return _internal_error(exc, debug=getattr(args, "debug", False), wants_json=getattr(args, "json", False))


def _render_error(args: argparse.Namespace, exc: PolymapError) -> int:
    print(exc.render(), file=sys.stderr)
    if getattr(args, "json", False):
        _print_json(_error_json(exc))
    return exc.exit_status


def _silence_stdout() -> None:
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
