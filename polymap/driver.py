"""Reading kernels the way every command does: file, ``--kernel``, ``-D``.

These helpers are shared by the commands and the Python API so that a
kernel selected or sized from the command line and from Python means the
same thing.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from polymap import ir
from polymap.cfront import read_c
from polymap.errors import InputError, SemanticError
from polymap.grammar import parse_program
from polymap.passes.frontend.bounds import bounds_diagnostics
from polymap.passes.frontend.params import param_values  # noqa: F401 - part of the API
from polymap.passes.frontend.semantics import checked
from polymap.limits import Limits, read_text


def parse(text: str, filename: str = "<input>", *, check: bool = True, limits: Limits | None = None) -> ir.Program:
    """Parse ``.loop`` text into a :class:`~polymap.ir.Program`.

    With ``check`` (the default) the semantic checks of ``dsl.md`` run too,
    and every error found is raised together in one
    :class:`~polymap.errors.PolymapError`; warnings are returned by
    :func:`warnings_of` (:func:`print_warnings` shows them on stderr).
    """
    program = parse_program(text, filename)
    if not check:
        return program
    program = checked(program)
    _check_with_isl(program, limits=limits if limits is not None else Limits())
    return program


def _check_with_isl(program: ir.Program, *, limits: Limits) -> None:
    """The ISL checks of ``dsl.md`` (bounds, uninitialised reads) on every kernel.

    Errors raise one :class:`~polymap.errors.SemanticError`; warnings are kept
    for :func:`warnings_of`.
    """
    found = {k.name: bounds_diagnostics(k, limits=limits) for k in program.kernels}
    errors = [d for ds in found.values() for d in ds if d.severity == "error"]
    if errors:
        raise SemanticError(errors)
    program.cache["warnings"] = {name: [d for d in ds if d.severity != "error"] for name, ds in found.items()}


def warnings_of(program: ir.Program, kernel: str | None = None) -> list:
    """The warnings :func:`parse` found in ``program`` (or in its kernel ``kernel``), as Diagnostics."""
    found = program.cache.get("warnings", {})
    if kernel is not None:
        return list(found.get(kernel, []))
    return [d for ds in found.values() for d in ds]


def print_warnings(program: ir.Program, kernels: Iterable[ir.Kernel] | None = None) -> None:
    """Render the warnings of ``program`` (restricted to ``kernels``, if given) on stderr."""
    names = None if kernels is None else {k.name for k in kernels}
    for name, ds in program.cache.get("warnings", {}).items():
        if names is None or name in names:
            for d in ds:
                print(d.render(), file=sys.stderr)


def load_program(path: str | Path, *, check: bool = True, cpp: str = "", limits: Limits | None = None) -> ir.Program:
    """Read and parse a ``.loop`` file, or the scops of a ``.c`` file (``InputError`` when it cannot be
    read or is larger than ``limits`` allow).

    ``cpp`` holds extra preprocessor flags for a C file (``--cpp "-I DIR"``).
    """
    limits = limits if limits is not None else Limits()
    p = Path(path)
    if p.suffix == ".c":
        program = read_c(p, cpp=cpp, limits=limits)
        if check:
            _check_with_isl(program, limits=limits)
        return program
    text = read_text(path, limits=limits, what="kernel file")
    return parse(text, str(path), check=check, limits=limits)


def select_kernels(program: ir.Program, name: str | None) -> tuple[ir.Kernel, ...]:
    """All kernels, or the one named by ``--kernel`` (``InputError`` if absent)."""
    if name is None:
        return program.kernels
    k = program.kernel(name)
    if k is None:
        known = ", ".join(x.name for x in program.kernels)
        raise InputError(f"{program.source.name}: no kernel named '{name}' (the file has: {known})")
    return (k,)


#: Largest ``-D`` value: numbers reach ISL points, NumPy shapes and C ``long``
#: arguments, and beyond 64 bits every one of them fails in its own way.
_MAX_PARAM = 2**63 - 1


def parse_defines(defines: list[str] | tuple[str, ...]) -> dict[str, int]:
    """``["N=8", "M=4"]`` -> ``{"N": 8, "M": 4}``; a malformed one is an ``InputError``."""
    out: dict[str, int] = {}
    for d in defines:
        name, sep, value = d.partition("=")
        if not sep or not name.strip().isidentifier():
            raise InputError(f"-D {d}: expected NAME=VALUE")
        try:
            out[name.strip()] = int(value)
        except ValueError:
            raise InputError(f"-D {d}: the value of {name.strip()} must be an integer") from None
        if abs(out[name.strip()]) > _MAX_PARAM:
            raise InputError(f"-D {d}: the value of {name.strip()} does not fit in 64 bits")
    return out


def check_defines(program: ir.Program, kernels: Iterable[ir.Kernel], defines: dict[str, int]) -> None:
    """Reject ``-D`` values no command could use, even one that needs no numbers.

    A name no selected kernel has is a typo when the file holds one kernel
    (with several, it may be meant for another one); a value below 1 is never
    a size; and when every parameter of a kernel has a number, the numbers
    must satisfy its ``where`` clause. ``show`` and ``deps`` stay symbolic but
    must not accept ``-D N=0`` silently where ``run`` refuses it.
    """
    known = {p for k in kernels for p in k.param_names}
    unknown = sorted(set(defines) - known)
    if unknown and len(program.kernels) == 1:
        k = program.kernels[0]
        names = ", ".join(k.param_names) or "none"
        raise InputError(f"-D {unknown[0]}: kernel '{k.name}' has no parameter "
                         f"'{unknown[0]}' (its parameters: {names})")
    for k in kernels:
        for name in k.param_names:
            if name in defines and defines[name] < 1:
                raise InputError(f"-D {name}={defines[name]}: parameters are sizes and must be >= 1")
        if all(p.name in defines or p.default is not None for p in k.params):
            param_values(k, defines)
