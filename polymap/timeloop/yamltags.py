"""Reading Timeloop's YAML: the safe loader with Timeloop's tags registered, and locations.

Timeloop v0.4 architectures tag tree nodes (``- !Container``, ``- !Component``);
YAML's safe loader refuses unknown tags, so these are registered (as plain
mappings) on a subclass of it, and nothing else is allowed. The data and the
location of every entry come from :mod:`polymap.yamlsource`; the tag of each
mapping is kept by path::

    nodes:                          tags[("architecture", "nodes", 0)] == "!Container"
      - !Container {name: System}
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from polymap.errors import MappingError
from polymap.yamlsource import YamlDocument, read_yaml
from polymap.ir import Loc

#: Tags of Timeloop's architecture trees.
TAGS = ("!Container", "!Component", "!Hierarchical", "!Parallel", "!Pipelined", "!Nothing")


class TimeloopLoader(yaml.SafeLoader):
    """YAML's safe loader plus Timeloop's node tags (read as mappings)."""


def _as_mapping(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


for _tag in TAGS:
    TimeloopLoader.add_constructor(_tag, _as_mapping)


def read(path: str | Path) -> tuple[YamlDocument, dict[tuple, str]]:
    """The document (data with locations) and the Timeloop tag of every tagged entry, by path."""
    doc = read_yaml(path)
    try:
        yaml.load(doc.source.text, Loader=TimeloopLoader)  # refuses any tag but the registered ones
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        raise MappingError(f"not a Timeloop file: {exc.problem}", doc.loc(())) if mark is None else \
            MappingError(f"not a Timeloop file: {exc.problem}", _mark_loc(doc, mark)) from None
    tags: dict[tuple, str] = {}
    node = yaml.compose(doc.source.text, Loader=TimeloopLoader)
    if node is not None:
        _tags(node, (), tags)
    return doc, tags


def _mark_loc(doc: YamlDocument, mark: yaml.Mark) -> Any:
    return Loc(mark.line + 1, mark.column + 1, mark.line + 1, mark.column + 2, doc.source)


def _tags(node: yaml.Node, path: tuple, out: dict[tuple, str]) -> None:
    if node.tag in TAGS:
        out[path] = node.tag
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            _tags(v, path + (k.value,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _tags(v, path + (i,), out)
