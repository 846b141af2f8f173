"""Stated limits on input: what polymap refuses rather than hangs or crashes on.

Every limit is a field of :class:`Limits` (an option passed down like the
others), raised on the command line with ``--limit NAME=VALUE``; a refusal
is a located error (exit 2) that names the limit and how to raise it::

    deep.loop:3:7: error: this nest is 14 loops deep; the analyses are exponential in the
      depth and polymap stops at 10 (raise it with --limit nest_depth=N)

* ``file_bytes``: a ``.loop``, mapping, architecture or ``.npz`` file read
  (a special file such as ``/dev/zero`` never ends);
* ``npz_bytes``: an ``.npz`` file of arrays for ``run`` (a file that is not
  regular, a device or a pipe, is read up to ``file_bytes`` whatever it is);
* ``yaml_depth``: nesting of a mapping or architecture file (PyYAML recurses);
* ``nest_depth``: loops of one nest, for dependences, legality, counting
  and code generation (lexicographic orders over ``d`` loops cost ISL ``d``
  disjuncts per pair and the dependence problems grow exponentially);
* ``statements``: statements of one kernel for the same analyses (pairs of
  statements grow quadratically, each an ISL problem);
* ``domain_pieces``: disjuncts of one statement's iteration domain
  (``if`` conditions ``or``-ed together, ``%`` terms);
* ``domain_moduli``: different moduli (and divisors) among the pieces of one
  statement's domain when it has several (``i % 2 == 0 or i % 3 == 0 or
  i % 5 == 0``): ISL's dataflow splits them against each other, 26 s for three,
  minutes for four;
* ``max_integer``: magnitude of a parameter value, and of the elements of a
  tensor at the given sizes (indices reach C ``long`` and NumPy shapes).
"""
from __future__ import annotations

import dataclasses
import os
import stat
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from polymap import ir
from polymap.errors import Diagnostic, InputError
from polymap.evaluate import eval_int
from polymap.islcheck import isl
from polymap.poly import KernelModel


@dataclass(frozen=True)
class Limits:
    file_bytes: int = 16 * 2**20
    npz_bytes: int = 2**32
    yaml_depth: int = 64
    nest_depth: int = 10
    statements: int = 120
    domain_pieces: int = 32
    domain_moduli: int = 2
    max_integer: int = 2**62

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Limits.{f.name} must be a positive integer, got {value!r}")

    @staticmethod
    def how_to_raise(name: str) -> str:
        return f"raise it with --limit {name}=N, or Limits({name}=N) in Python"


def parse_limits(texts: Sequence[str]) -> Limits:
    """``--limit NAME=VALUE`` (repeatable) as :class:`Limits`; a bad one is an ``InputError``."""
    names = [f.name for f in dataclasses.fields(Limits)]
    values: dict[str, int] = {}
    for text in texts:
        name, eq, value = text.partition("=")
        name = name.strip()
        if not eq or name not in names:
            raise InputError(f"--limit {text}: expected NAME=VALUE with NAME one of {', '.join(names)}")
        try:
            number = int(value.replace("_", ""))
        except ValueError:
            raise InputError(f"--limit {text}: {value!r} is not a whole number") from None
        if number < 1:
            raise InputError(f"--limit {text}: a limit must be at least 1")
        values[name] = number
    return Limits(**values)


def read_limited(path: str | Path, *, limits: Limits, what: str, limit_name: str = "file_bytes") -> bytes:
    """The bytes of ``path``, refusing more than the limit ``limit_name`` of ``limits`` (special files included).

    ``OSError`` passes through for the caller to word; a file over the limit
    is an ``InputError`` naming it.
    """
    limit = getattr(limits, limit_name)
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory")
        if not stat.S_ISREG(mode):  # a device or a pipe: no size to trust, and maybe no end
            limit, limit_name = min(limit, limits.file_bytes), "file_bytes"
        size = info.st_size if info.st_size > limit else len(data := f.read(limit + 1))
    if size > limit:
        kind = "" if stat.S_ISREG(mode) else " (not a regular file)"
        raise InputError(Diagnostic(f"the {what} is larger than {limit} bytes{kind}; "
                                    f"{Limits.how_to_raise(limit_name)}",
                                    ir.Loc(0, 0, 0, 0, ir.SourceFile(str(path), ""))))
    return data


def read_text(path: str | Path, *, limits: Limits, what: str,
              error: type[InputError] = InputError) -> str:
    """The text of the user's file ``path``, read under ``limits``; every failure is ``error`` naming the file.

    The one reader of kernel, C and YAML files: a missing or unreadable file,
    one that is not text, and one over the size limit are all bad input
    located at the file (``--json`` errors then carry its name).
    """
    where = ir.Loc(0, 0, 0, 0, ir.SourceFile(str(path), ""))
    try:
        return read_limited(path, limits=limits, what=what).decode()
    except OSError as exc:
        raise error(Diagnostic(f"cannot read file: {exc.strerror or exc}", where)) from None
    except UnicodeDecodeError:
        raise error(Diagnostic("not a text file", where)) from None
    except InputError as exc:
        if error is InputError:
            raise
        raise error(Diagnostic(exc.diagnostics[0].message, where)) from None


def require_tractable(kernel: ir.Kernel, *, limits: Limits, model: KernelModel | None = None,
                      what: str = "the analyses") -> None:
    """Refuse a kernel whose nests, statements or domains are past ``limits`` for ``what``.

    Called before the analyses that are exponential in these sizes
    (dependences, legality, counting, code generation); ``show`` needs none.
    """
    diags = tractability_problems(kernel, limits=limits, model=model, what=what)
    if diags:
        raise InputError(diags)


def tractability_problems(kernel: ir.Kernel, *, limits: Limits, model: KernelModel | None = None,
                          what: str = "the analyses") -> list[Diagnostic]:
    """What :func:`require_tractable` refuses, as diagnostics (empty: within ``limits``).

    Also read by the front end, which leaves out its uninitialised-read
    warning (ISL's dataflow) on a kernel past the limits instead of running
    it for minutes while reading the file.
    """
    diags: list[Diagnostic] = []
    contexts = list(ir.walk_statements(kernel))
    deepest: dict[int | None, ir.StatementContext] = {}  # per nest, its deepest statement
    for ctx in contexts:
        if ctx.nest not in deepest or len(ctx.loops) > len(deepest[ctx.nest].loops):
            deepest[ctx.nest] = ctx
    for ctx in deepest.values():
        if len(ctx.loops) > limits.nest_depth:
            loop = ctx.loops[limits.nest_depth]
            diags.append(Diagnostic(
                f"statement '{ctx.name}' is {len(ctx.loops)} loops deep; {what} are exponential in the "
                f"depth and polymap stops at {limits.nest_depth} ({Limits.how_to_raise('nest_depth')})",
                loop.loc if loop.loc.line > 0 else ctx.stmt.loc))
    if len(contexts) > limits.statements:
        extra = contexts[limits.statements]
        diags.append(Diagnostic(
            f"kernel '{kernel.name}' has {len(contexts)} statements; {what} grow with every pair of "
            f"statements and polymap stops at {limits.statements} ({Limits.how_to_raise('statements')})",
            extra.stmt.loc))
    if not diags and model is not None:
        for ctx, sm in zip(contexts, model.statements):
            pieces = sm.domain.n_basic_set()
            moduli = _moduli(sm.domain) if pieces > 1 else set()
            cond = ctx.conditions[-1][0] if ctx.conditions else None
            where = cond.loc if cond is not None else ctx.stmt.loc
            if pieces > limits.domain_pieces:
                diags.append(Diagnostic(
                    f"the iteration domain of statement '{ctx.name}' has {pieces} pieces (conditions or-ed "
                    f"together); {what} are exponential in them and polymap stops at "
                    f"{limits.domain_pieces} ({Limits.how_to_raise('domain_pieces')})", where))
            elif len(moduli) > limits.domain_moduli:
                diags.append(Diagnostic(
                    f"the iteration domain of statement '{ctx.name}' is {pieces} pieces with {len(moduli)} "
                    f"different moduli ({', '.join(map(str, sorted(moduli)))}); {what} are exponential in "
                    f"them and polymap stops at {limits.domain_moduli} "
                    f"({Limits.how_to_raise('domain_moduli')})", where))
    return diags


def require_integers(kernel: ir.Kernel, params: Mapping[str, int], *, limits: Limits,
                     what: str = "the generated code") -> None:
    """Refuse parameter values and tensor sizes (at ``params``) past ``limits.max_integer``.

    C indexes every tensor with one ``long`` offset and NumPy allocates its
    shape: a tensor with more elements than ``max_integer`` (default 2^62,
    so that an offset plus a stride still fits 63 bits) cannot be indexed.
    """
    bound = limits.max_integer
    diags = []
    for p in kernel.params:
        v = params.get(p.name)
        if v is not None and abs(int(v)) > bound:
            diags.append(Diagnostic(f"parameter {p.name} = {v} is beyond +-{bound}, which {what} cannot "
                                    f"index with 64-bit integers ({Limits.how_to_raise('max_integer')})", p.loc))
    for e in _index_expressions(kernel):
        for c in ir.subexpressions(e):
            if isinstance(c, ir.Const) and isinstance(c.value, int) and abs(c.value) > bound:
                diags.append(Diagnostic(f"the constant {c.value} is beyond +-{bound}: {what} computes loop "
                                        f"bounds and subscripts in 64-bit integers "
                                        f"({Limits.how_to_raise('max_integer')})", c.loc))
    for loop in _loops(kernel):
        # A step is a plain integer, not an expression: the generated code adds it to a
        # 64-bit iterator, and the reference steps a NumPy int64 range by it.
        if abs(loop.step) > bound:
            diags.append(Diagnostic(f"the step {loop.step} of loop {loop.var} is beyond +-{bound}: {what} "
                                    f"steps its iterators in 64-bit integers "
                                    f"({Limits.how_to_raise('max_integer')})",
                                    loop.step_loc if loop.step_loc != ir.NOWHERE else loop.loc))
    if diags:
        raise InputError(diags)
    for d in kernel.decls:
        try:
            size = prod(max(0, eval_int(e, dict(params))) for e in d.shape)
        except (KeyError, ValueError, ZeroDivisionError):
            continue
        if size > bound:
            diags.append(Diagnostic(
                f"tensor {d.name} has {size} elements at these sizes, beyond {bound}: {what} indexes it with "
                f"one 64-bit offset ({Limits.how_to_raise('max_integer')})", d.loc))
    if diags:
        raise InputError(diags)


def _moduli(domain: isl.Set) -> set[int]:
    """The denominators of the divisions (``%``, ``floor``, strides) in the pieces of ``domain``."""
    out: set[int] = set()
    for bset in domain.get_basic_sets():
        for k in range(bset.dim(isl.dim_type.div)):
            out.add(int(bset.get_div(k).get_denominator_val().to_python()))
    return out


def _loops(kernel: ir.Kernel) -> Iterator[ir.Loop]:
    """Every loop of the kernel, once."""
    seen: set[int] = set()
    for ctx in ir.walk_statements(kernel):
        for loop in ctx.loops:
            if id(loop) not in seen:
                seen.add(id(loop))
                yield loop


def _index_expressions(kernel: ir.Kernel) -> Iterator[ir.Expr]:
    """Every integer-valued expression of the kernel: shapes, bounds, conditions, subscripts."""
    for d in kernel.decls:
        yield from d.shape
    seen: set[int] = set()
    for ctx in ir.walk_statements(kernel):
        for loop in ctx.loops:
            if id(loop) not in seen:
                seen.add(id(loop))
                yield from loop.lower + loop.upper
        for cond, _ in ctx.conditions:
            if id(cond) not in seen:
                seen.add(id(cond))
                yield cond.cond
        yield from ctx.stmt.target.indices
        for ref in ir.reads_of(ctx.stmt):
            yield from ref.indices
