"""What several commands read from their flags: choice options, progress, the architecture of a mapping.

Only the command line reads flags, the terminal and the environment; what
it finds becomes option dataclasses passed to :mod:`polymap.api`.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from polymap.errors import InputError
from polymap.limits import Limits
from polymap.machine.arch import Architecture
from polymap.machine.presets import load_architecture, presets
from polymap.mapping.documents import DOCUMENT_KEYS, is_document
from polymap.mapping.files import MAPPING_KEYS
from polymap.passes.counting.cost_model import Objective
from polymap.passes.search.choice import ChoiceOptions
from polymap.yamlsource import read_yaml


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


def mapping_arch(spec: str | None, mapping_path: str, *, limits: Limits | None = None) -> Architecture:
    """``--arch`` when given; else the architecture a compile document names, or the preset whose
    level names the mapping file uses."""
    if spec:
        return load_architecture(spec, limits=limits)
    doc = read_yaml(mapping_path, limits=limits)
    data = doc.data
    if is_document(data):
        if isinstance(data.get("arch"), str) and data["arch"] in presets():
            return load_architecture(data["arch"])
        entries = data["mappings"] if isinstance(data["mappings"], list) else []
        data = entries[0] if entries and isinstance(entries[0], dict) else {}
    if not isinstance(data, dict):
        doc.fail((), f"a mapping file holds a mapping with keys {', '.join(MAPPING_KEYS)}, or a compile "
                     f"document with keys {', '.join(DOCUMENT_KEYS)}")
    levels = data.get("levels")
    if not isinstance(levels, list):
        doc.fail(("levels",) if "levels" in data else (),
                 "levels: expected a list with one entry per architecture level, outermost first")
    names = [lv.get("level") for lv in levels if isinstance(lv, dict)]
    known = []
    for name in presets():
        arch = load_architecture(name)
        if [lv.name for lv in arch.levels] == names:
            return arch
        known.append(f"{name}: {', '.join(arch.level_names)}")
    doc.fail(("levels",), f"the levels ({', '.join(map(str, names)) or 'none named'}) match no preset "
                          f"architecture ({'; '.join(known)}); give one with --arch")


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
