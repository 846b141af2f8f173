"""YAML documents that remember where each entry came from.

Architecture and mapping files are YAML; an error in one must point at the
entry (``gemm.map.yaml:12:11``) and quote the line, like errors in ``.loop``
files. PyYAML's composer keeps a mark on every node, so we compose, build
plain Python data ourselves and keep a table from the *path* of each entry
(``("levels", 2, "tile", "j")``) to its location::

    levels:                      path ("levels",)
      - level: RF                path ("levels", 0); key ("levels", 0, "level")
        tile: {j: 0}             value ("levels", 0, "tile", "j") -> 3:19
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.constructor import SafeConstructor

from polymap.errors import MappingError
from polymap.ir import Loc, SourceFile
from polymap.limits import Limits, read_text

YamlPath = tuple[Any, ...]


@dataclass(frozen=True, eq=False)
class YamlDocument:
    """Plain data read from YAML, with the location of every value and key."""

    data: Any
    source: SourceFile
    values: dict[YamlPath, Loc] = field(default_factory=dict, repr=False)
    keys: dict[YamlPath, Loc] = field(default_factory=dict, repr=False)

    def loc(self, path: YamlPath, *, key: bool = False) -> Loc:
        """Where ``path`` is (its key with ``key=True``); falls back to the nearest enclosing entry."""
        table = self.keys if key else self.values
        if path in table:
            return table[path]
        for cut in range(len(path) - 1, -1, -1):
            if path[:cut] in self.values:
                return self.values[path[:cut]]
        return file_loc(self.source.name, self.source)

    def fail(self, path: YamlPath, message: str, *, key: bool = False) -> NoReturn:
        """Raise a :class:`MappingError` with ``message`` at the entry ``path``."""
        raise MappingError(message, self.loc(path, key=key))

    @classmethod
    def of_data(cls, data: Any, name: str) -> "YamlDocument":
        """Data built in Python (no text): errors name the file ``name`` without a line."""
        return cls(data, SourceFile(name, ""))


def file_loc(name: str, source: SourceFile | None = None) -> Loc:
    """A location naming a file but no line (for data that did not come from text)."""
    return Loc(0, 0, 0, 0, source if source is not None else SourceFile(name, ""))


def _loc(node: yaml.Node, source: SourceFile) -> Loc:
    s, e = node.start_mark, node.end_mark
    return Loc(s.line + 1, s.column + 1, e.line + 1, e.column + 1, source)


#: Values one document may expand to. Mapping and architecture files are small;
#: aliases of aliases ("billion laughs") must not make one exponentially large.
_MAX_VALUES = 100_000


def _build(node: yaml.Node, path: YamlPath, doc: YamlDocument, ctor: SafeConstructor,
           open_nodes: frozenset[int] = frozenset()) -> Any:
    # An alias to an enclosing entry (``a: &x [*x]``) is a cycle: plain data cannot hold it.
    if id(node) in open_nodes:
        raise MappingError("a YAML alias refers to an entry that contains it", _loc(node, doc.source))
    if len(doc.values) >= _MAX_VALUES:
        raise MappingError(f"the document expands to more than {_MAX_VALUES} values (aliases of aliases?)",
                           _loc(node, doc.source))
    open_nodes = open_nodes | {id(node)}
    doc.values[path] = _loc(node, doc.source)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for knode, vnode in node.value:
            key = _construct(knode, doc, ctor)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise MappingError(f"a key must be a name, not {key!r}", _loc(knode, doc.source))
            if key in out:
                raise MappingError(f"duplicate key '{key}'", _loc(knode, doc.source))
            doc.keys[path + (key,)] = _loc(knode, doc.source)
            out[key] = _build(vnode, path + (key,), doc, ctor, open_nodes)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(v, path + (k,), doc, ctor, open_nodes) for k, v in enumerate(node.value)]
    return _construct(node, doc, ctor)


def _construct(node: yaml.Node, doc: YamlDocument, ctor: SafeConstructor) -> Any:
    """PyYAML's value for one node; a tagged scalar it cannot convert (``2001-13-45``,
    ``!!int xyz``) raises ValueError inside PyYAML, which is bad input here."""
    try:
        return ctor.construct_object(node, deep=True)
    except (ValueError, TypeError, OverflowError) as exc:
        raise MappingError(f"not valid YAML: cannot read {node.value!r} as {node.tag.rsplit(':', 1)[-1]} ({exc})",
                           _loc(node, doc.source)) from None


def _check_depth(text: str, source: SourceFile, limit: int) -> None:
    """Refuse nesting deeper than ``limit`` before PyYAML's composer recurses into it."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > limit:
                m = event.start_mark
                raise MappingError(
                    f"the YAML nests deeper than {limit} levels; {Limits.how_to_raise('yaml_depth')}",
                    Loc(m.line + 1, m.column + 1, m.line + 1, m.column + 2, source))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def parse_yaml(text: str, name: str, *, limits: Limits | None = None) -> YamlDocument:
    """Parse YAML ``text`` (read from ``name``); bad YAML is a :class:`MappingError` at its line."""
    limits = limits if limits is not None else Limits()
    source = SourceFile(name, text)
    doc = YamlDocument(None, source)
    try:
        _check_depth(text, source, limits.yaml_depth)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = Loc(mark.line + 1, mark.column + 1, mark.line + 1, mark.column + 2, source) if mark else file_loc(name, source)
        raise MappingError(f"not valid YAML: {exc.problem or exc.context}", loc) from None
    except yaml.YAMLError as exc:
        raise MappingError(f"not valid YAML: {exc}", file_loc(name, source)) from None
    if node is None:
        return doc
    try:
        data = _build(node, (), doc, SafeConstructor())
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = Loc(mark.line + 1, mark.column + 1, mark.line + 1, mark.column + 2, source) if mark else file_loc(name, source)
        raise MappingError(f"not valid YAML: {exc.problem}", loc) from None
    object.__setattr__(doc, "data", data)
    return doc


def read_yaml(path: str | Path, *, limits: Limits | None = None) -> YamlDocument:
    """Read and parse a YAML file; an unreadable file is a :class:`MappingError` naming it."""
    limits = limits if limits is not None else Limits()
    text = read_text(path, limits=limits, what="YAML file", error=MappingError)
    return parse_yaml(text, str(path), limits=limits)
