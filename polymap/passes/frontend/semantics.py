"""The rules of ``dsl.md`` that syntax alone cannot check (no ISL needed).

Names (undefined, redefined, shadowing iterators, duplicate labels), tensor
use (number of subscripts, writes to ``in`` tensors, assigning to an
iterator or parameter), dtypes, ``step`` values, function names and arities,
and (via :mod:`.quasi_affine`) that subscripts, bounds, conditions, extents
and the ``where`` clause are quasi-affine. Every independent error is
collected so that the user sees them all at once.

Usage::

    program = checked(parse_program(text, filename))   # raises SemanticError
"""
from __future__ import annotations

from polymap import ir
from polymap.errors import Diagnostic, SemanticError
from polymap.passes.frontend.quasi_affine import Scope, condition_problems, index_problems, text
from polymap.passes.frontend.types import ARITY



def check_program(program: ir.Program) -> list[Diagnostic]:
    """Every error and warning in ``program``, in source order per kernel."""
    out: list[Diagnostic] = []
    if not program.kernels:
        out.append(Diagnostic("the file holds no kernel; write 'kernel NAME(PARAMS) { ... }'",
                              ir.Loc(1, 1, 1, 2, program.source)))
    seen: dict[str, ir.Kernel] = {}
    for kernel in program.kernels:
        if kernel.name in seen:
            out.append(Diagnostic(f"kernel '{kernel.name}' is defined twice (first at line "
                                  f"{seen[kernel.name].loc.line})", kernel.loc))
        seen.setdefault(kernel.name, kernel)
        out += check_kernel(kernel)
    return out


def checked(program: ir.Program) -> ir.Program:
    """``program`` itself if it has no semantic error; else raise them all in one SemanticError."""
    errors = [d for d in check_program(program) if d.severity == "error"]
    if errors:
        raise SemanticError(errors)
    return program


def check_kernel(kernel: ir.Kernel) -> list[Diagnostic]:
    """The diagnostics of one kernel (see the module docstring for the rules)."""
    out: list[Diagnostic] = []
    out += _check_params(kernel)
    out += _check_decls(kernel)
    scope = Scope(frozenset(kernel.param_names), frozenset(d.name for d in kernel.decls))
    param_scope = Scope(scope.params, scope.tensors)
    for cond in kernel.where:
        out += condition_problems(cond, param_scope, "where clause")
    out += _check_body(kernel.body, kernel, scope)
    out += _check_labels(kernel)
    # Report in source order, whatever rule found them.
    return sorted(out, key=lambda d: (d.loc.line, d.loc.col) if d.loc is not None else (0, 0))


# --------------------------------------------------------------------------- declarations


def _check_params(kernel: ir.Kernel) -> list[Diagnostic]:
    out = []
    seen: dict[str, ir.Param] = {}
    for p in kernel.params:
        if p.name in seen:
            out.append(Diagnostic(f"parameter '{p.name}' is defined twice in kernel '{kernel.name}' "
                                  f"(first at line {seen[p.name].loc.line})", p.loc))
        seen.setdefault(p.name, p)
        if p.default is not None and p.default < 1:
            out.append(Diagnostic(f"parameter '{p.name}' has default {p.default}, but parameters "
                                  "are sizes and must be >= 1", p.loc))
    return out


def _check_decls(kernel: ir.Kernel) -> list[Diagnostic]:
    out = []
    params = {p.name: p for p in kernel.params}
    seen: dict[str, ir.Decl] = {}
    scope = Scope(frozenset(params), frozenset(d.name for d in kernel.decls))
    for d in kernel.decls:
        if d.name in params:
            out.append(Diagnostic(f"tensor '{d.name}' is already defined as a parameter of kernel "
                                  f"'{kernel.name}' (line {params[d.name].loc.line})", _name_loc(d)))
        elif d.name in seen:
            out.append(Diagnostic(f"tensor '{d.name}' is declared twice "
                                  f"(first at line {seen[d.name].loc.line})", _name_loc(d)))
        seen.setdefault(d.name, d)
        if d.dtype not in ir.DTYPES:
            out.append(Diagnostic(f"unknown dtype '{d.dtype}' for tensor '{d.name}' "
                                  f"(expected {', '.join(ir.DTYPES[:-1])} or {ir.DTYPES[-1]})", _dtype_loc(d)))
        for extent in d.shape:
            out += index_problems(extent, scope, "extent")
    return out


def _name_loc(d: ir.Decl) -> ir.Loc:
    """The span of the declared name (a Decl's loc covers the whole declaration)."""
    src = d.loc.source
    if src is None or d.loc.line <= 0:
        return d.loc
    line = src.line(d.loc.line)
    col = line.find(d.name, d.loc.col - 1 + len(d.role)) + 1
    return ir.Loc(d.loc.line, col, d.loc.line, col + len(d.name), src) if col > 0 else d.loc


def _dtype_loc(d: ir.Decl) -> ir.Loc:
    """The span of the dtype, written last in the declaration."""
    end = d.loc.end_col
    return ir.Loc(d.loc.end_line, end - len(d.dtype), d.loc.end_line, end, d.loc.source)


def _check_labels(kernel: ir.Kernel) -> list[Diagnostic]:
    out = []
    seen: dict[str, ir.Assign] = {}
    for ctx in kernel.statements():
        s = ctx.stmt
        if s.label in seen:
            first = seen[s.label]
            how = "" if s.explicit_label else " (the name of this unlabelled statement)"
            was = "" if first.explicit_label else " for an unlabelled statement"
            out.append(Diagnostic(f"duplicate label '{s.label}'{how}: already used{was} at line "
                                  f"{first.loc.line}", s.loc))
        seen.setdefault(s.label, s)
    return out


# --------------------------------------------------------------------------- body


def _check_body(nodes: tuple[ir.Node, ...], kernel: ir.Kernel, scope: Scope) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for node in nodes:
        match node:
            case ir.Loop():
                out += _check_loop(node, kernel, scope)
            case ir.If(cond=c, then=t, orelse=e):
                out += condition_problems(c, scope, "condition")
                out += _check_body(t, kernel, scope)
                out += _check_body(e, kernel, scope)
            case ir.Assign():
                out += _check_assign(node, kernel, scope)
    return out


def _check_loop(loop: ir.Loop, kernel: ir.Kernel, scope: Scope) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    var_loc = ir.Loc(loop.loc.line, loop.loc.col, loop.loc.line, loop.loc.col + len(loop.var),
                     loop.loc.source)
    kind = scope.kind(loop.var)
    if kind is not None:
        out.append(Diagnostic(f"iterator '{loop.var}' shadows the {kind} '{loop.var}'; "
                              "choose another name", var_loc))
    for e in loop.lower:
        if isinstance(e, ir.Call) and e.func == "min":
            out.append(Diagnostic(f"'{text(e)}' in a lower bound: a lower bound may be max(...) "
                                  "of several bounds, not min(...)", e.loc))
            continue
        out += index_problems(e, scope, "loop bound")
    for e in loop.upper:
        if isinstance(e, ir.Call) and e.func == "max":
            out.append(Diagnostic(f"'{text(e)}' in an upper bound: an upper bound may be min(...) "
                                  "of several bounds, not max(...)", e.loc))
            continue
        out += index_problems(e, scope, "loop bound")
    if loop.step < 1:
        out.append(Diagnostic(f"step must be a positive integer constant, not '{text(loop.step_loc)}'",
                              loop.step_loc if loop.step_loc.line > 0 else var_loc))
    inner = Scope(scope.params, scope.tensors, scope.iterators + (loop.var,))
    out += _check_body(loop.body, kernel, inner)
    return out


def _check_assign(stmt: ir.Assign, kernel: ir.Kernel, scope: Scope) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    target = stmt.target
    kind = scope.kind(target.tensor)
    if kind in ("iterator", "parameter"):
        out.append(Diagnostic(f"cannot assign to {kind} '{target.tensor}'; only tensors "
                              "can be written", target.loc))
    elif kind is None:
        out.append(Diagnostic(f"undefined name '{target.tensor}': assign only to declared tensors",
                              target.loc))
    else:
        decl = kernel.decl(target.tensor)
        if decl.role == "in":
            out.append(Diagnostic(f"'{target.tensor}' is declared 'in' and cannot be written; "
                                  "declare it 'inout' or 'out'", target.loc))
        out += _check_ref(target, kernel, scope)
    out += _check_value(stmt.value, kernel, scope)
    return out


def _check_ref(ref: ir.Ref, kernel: ir.Kernel, scope: Scope) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    decl = kernel.decl(ref.tensor)
    if decl is not None and len(ref.indices) != len(decl.shape):
        if decl.is_scalar:
            msg = f"'{ref.tensor}' is a scalar and cannot be subscripted"
        else:
            n = len(decl.shape)
            msg = (f"tensor '{ref.tensor}' has {n} dimension{'s' if n != 1 else ''} but is "
                   f"indexed with {len(ref.indices)} subscript{'s' if len(ref.indices) != 1 else ''}")
        out.append(Diagnostic(msg, ref.loc))
    for idx in ref.indices:
        out += index_problems(idx, scope, "subscript")
    return out


def _check_value(e: ir.Expr, kernel: ir.Kernel, scope: Scope) -> list[Diagnostic]:
    """A right-hand side: data may flow anywhere, but names and functions must exist."""
    out: list[Diagnostic] = []
    match e:
        case ir.Var(name=n) if scope.kind(n) is None:
            out.append(Diagnostic(f"undefined name '{n}'", e.loc))
        case ir.Ref(tensor=t):
            kind = scope.kind(t)
            if kind is None:
                out.append(Diagnostic(f"undefined name '{t}'", e.loc))
            elif kind != "tensor":
                out.append(Diagnostic(f"'{t}' is {'an' if kind == 'iterator' else 'a'} {kind}, "
                                      "not a tensor, and cannot be subscripted", e.loc))
            else:
                out += _check_ref(e, kernel, scope)
        case ir.Call(func=f, args=args):
            out += _check_call(e, f, len(args))
            for a in args:
                out += _check_value(a, kernel, scope)
        case ir.BinOp(lhs=a, rhs=b) | ir.Compare(lhs=a, rhs=b):
            out += _check_value(a, kernel, scope) + _check_value(b, kernel, scope)
        case ir.Neg(operand=a) | ir.Not(operand=a):
            out += _check_value(a, kernel, scope)
        case ir.BoolOp(operands=args):
            for a in args:
                out += _check_value(a, kernel, scope)
        case ir.Select(cond=c, if_true=a, if_false=b):
            for x in (c, a, b):
                out += _check_value(x, kernel, scope)
    return out


def _check_call(e: ir.Call, func: str, n: int) -> list[Diagnostic]:
    if func == "select":
        return [Diagnostic(f"select takes 3 arguments (condition, value if true, value if false), "
                           f"not {n}", e.loc)]
    if func not in ARITY:
        known = ", ".join(sorted(ARITY)) + " and select"
        return [Diagnostic(f"unknown function '{func}' (the functions are {known})", e.loc)]
    lo, hi = ARITY[func]
    if n < lo or (hi is not None and n > hi):
        want = f"{lo}" if lo == hi else f"at least {lo}"
        return [Diagnostic(f"{func} takes {want} argument{'s' if lo != 1 else ''}, not {n}", e.loc)]
    return []
