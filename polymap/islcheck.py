"""Fail loudly when islpy lacks barvinok.

``islpy`` and ``islpy-barvinok`` install the same module; installing a
package that depends on plain ``islpy`` silently replaces the barvinok build,
and every count would be lost. polymap refuses to run instead of estimating.
"""
from __future__ import annotations

from types import ModuleType

from polymap.errors import EnvironmentProblem


def require_barvinok() -> ModuleType:
    """Import islpy and check that ``card()`` exists; return the module."""
    try:
        import islpy as isl
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise EnvironmentProblem(
            "islpy is not installed; install polymap's dependencies (pip install islpy-barvinok)"
        ) from exc
    if not hasattr(isl.Set, "card"):  # pragma: no cover - depends on the installation
        raise EnvironmentProblem(
            "islpy was built without barvinok (isl.Set has no card()); "
            "plain 'islpy' was probably installed over 'islpy-barvinok'. "
            "Fix: pip uninstall -y islpy islpy-barvinok && pip install islpy-barvinok"
        )
    return isl


isl = require_barvinok()
