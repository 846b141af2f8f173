"""What several commands read from their flags: choice options, progress, ``--fix`` values.

Only the command line reads flags, the terminal and the environment; what
it finds becomes option dataclasses passed to :mod:`polymap.api`.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from polymap.errors import InputError
from polymap.passes.counting.cost_model import Objective
from polymap.passes.search.choice import ChoiceOptions


def choice_options(args: argparse.Namespace) -> ChoiceOptions:
    """``--objective`` and ``--search-evaluations`` as :class:`ChoiceOptions` (defaults when absent)."""
    default = ChoiceOptions()
    objective = getattr(args, "objective", None)
    evaluations = getattr(args, "search_evaluations", None)
    return ChoiceOptions(objective=Objective.parse(objective) if objective else default.objective,
                         search_evaluations=default.search_evaluations if evaluations is None else evaluations)


def progress_printer(enabled: bool | None = None) -> Callable[[str], None] | None:
    """A callback printing progress on stderr, or None when stderr is no terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return None
    return lambda text: print(text, file=sys.stderr, flush=True)


def parse_fixes(items: list[str]) -> dict[str, int]:
    """``--fix LOOP=VALUE`` flags (repeatable) as ``{loop: value}``."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise InputError(f"--fix {item}: expected LOOP=VALUE")
        try:
            v = int(value)
        except ValueError:
            raise InputError(f"--fix {item}: expected LOOP=VALUE with an integer value") from None
        if name in out and out[name] != v:
            raise InputError(f"--fix {item}: loop '{name}' is already fixed at {out[name]}")
        out[name] = v
    return out
