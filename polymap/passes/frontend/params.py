"""The kernel's sizes in numbers: ``-D`` values over the parameters' defaults, checked.

``kernel gemm(M = 256, N, K = 64) where N >= M`` with ``-D N=300`` ->
``{"M": 256, "N": 300, "K": 64}``; a missing value, a value below 1 or a
broken ``where`` clause is an :class:`~polymap.errors.InputError` located at
the parameter or the clause. Every stage that needs numbers (counting, the
fast path, code generation, the commands) asks this one function.
"""
from __future__ import annotations

from polymap import ir
from polymap.errors import Diagnostic, InputError
from polymap.evaluate import eval_int_condition


def param_values(kernel: ir.Kernel, defines: dict[str, int] | None = None) -> dict[str, int]:
    """Numbers for every parameter: ``-D`` values over defaults.

    A parameter with neither is an error at the parameter's declaration;
    a ``-D`` for a name the kernel lacks is ignored only when the file holds
    several kernels (the caller decides; here it is simply not used). Values
    must be >= 1 and satisfy the kernel's ``where`` clause.
    """
    defines = defines or {}
    values: dict[str, int] = {}
    diags = []
    for p in kernel.params:
        if p.name in defines:
            values[p.name] = defines[p.name]
        elif p.default is not None:
            values[p.name] = p.default
        else:
            diags.append(Diagnostic(
                f"parameter '{p.name}' of kernel '{kernel.name}' has no default and no -D {p.name}=VALUE was given",
                p.loc))
    if diags:
        raise InputError(diags)
    for name, v in values.items():
        if v < 1:
            raise InputError(f"-D {name}={v}: parameters are sizes and must be >= 1")
    _check_where(kernel, values)
    return values


def _check_where(kernel: ir.Kernel, values: dict[str, int]) -> None:
    for cond in kernel.where:
        if not eval_int_condition(cond, values):
            shown = ", ".join(f"{k}={v}" for k, v in values.items())
            raise InputError([Diagnostic(
                f"parameter values {shown} violate the kernel's 'where' clause", cond.loc)])
