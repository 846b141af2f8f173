"""The C function's signature: ``cli.md``'s, or the original C function's for a kernel read from C.

``cli.md`` fixes one signature for ``.loop`` kernels: tensors by pointer in
declaration order, then the parameters as ``long``. A kernel read from a C
file (:mod:`polymap.cfront`) records its function's arguments
(``Kernel.signature``); the generated function then takes them in that order
and with those types, so that it drops into the original program::

    void kernel_gemm(int ni, ..., double alpha, ..., double C[20][25], ...)   (the original)
      ->  void kernel_gemm(int ni, ..., double polymap_arg_alpha, ..., double polymap_arg_C[20][25], ...)
          {
            double *restrict alpha = &polymap_arg_alpha;
            double *restrict C = (double *)polymap_arg_C;

The body then reads scalars as ``alpha[0]`` and arrays row-major, as for
any kernel. An array's extents are written as declared when every parameter
they use comes earlier in the argument list (C's rule for array
parameters), else the argument is a plain pointer.
"""
from __future__ import annotations

from typing import Callable

from polymap import ir
from polymap.codegen.c.expr import C_TYPES, c_name


def c_signature(kernel: ir.Kernel, extent: Callable[[ir.Expr], str]) -> str:
    """``void NAME(...)``; ``extent`` prints an array extent in C."""
    if kernel.signature is None:
        args = [f"{C_TYPES[d.dtype]} *restrict {c_name(d.name)}" for d in kernel.decls if d.role != "local"]
        args += [f"long {c_name(p)}" for p in kernel.param_names]
        return f"void {c_name(kernel.name)}({', '.join(args) or 'void'})"
    return f"void {c_name(kernel.name)}({', '.join(_arguments(kernel, extent)) or 'void'})"


def _arguments(kernel: ir.Kernel, extent: Callable[[ir.Expr], str]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for a in kernel.signature or ():
        d = kernel.decl(a.name)
        if d is None:
            out.append(f"{a.c_type} {c_name(a.name)}")
        elif d.is_scalar:
            out.append(f"{C_TYPES[d.dtype]} polymap_arg_{a.name}")
        elif all(v.name in seen for e in d.shape for v in ir.subexpressions(e) if isinstance(v, ir.Var)):
            dims = "".join(f"[{extent(e)}]" for e in d.shape)
            out.append(f"{C_TYPES[d.dtype]} polymap_arg_{a.name}{dims}")
        else:
            out.append(f"{C_TYPES[d.dtype]} *polymap_arg_{a.name}")
        seen.add(a.name)
    return out


def prologue(kernel: ir.Kernel) -> list[str]:
    """The lines that give the original arguments the names the body uses (none for ``cli.md``'s signature)."""
    lines = []
    for a in kernel.signature or ():
        d = kernel.decl(a.name)
        if d is None:
            continue
        t = C_TYPES[d.dtype]
        if d.is_scalar:
            lines.append(f"{t} *restrict {c_name(d.name)} = &polymap_arg_{a.name};")
        else:
            lines.append(f"{t} *restrict {c_name(d.name)} = ({t} *)polymap_arg_{a.name};")
    return lines
