"""Mapping files that hold several mappings: what ``compile`` writes is what every command reads.

A mapping file of ``mapping.md`` holds one mapping. ``compile``'s
``NAME.json`` holds one per mapped nest, with the sizes, the architecture
and each mapping's cost document::

    {"kernel": "gemm", "params": {...}, "arch": "host",
     "mappings": [{"kernel": "gemm", "nest": 0, "levels": [...]}],
     "cost": [{"kernel": "gemm", "instances": ..., "levels": [...], ...}], ...}

:func:`load_mappings` reads either form (a ``mappings`` key marks the
second); errors in an entry point at its line inside the file, as for a
single mapping (each entry is read by
:func:`polymap.mapping.files.mapping_from_dict`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from polymap import ir
from polymap.machine.arch import Architecture
from polymap.mapping.files import mapping_from_dict
from polymap.mapping.model import Mapping
from polymap.yamlsource import YamlDocument, read_yaml

#: the keys of a ``compile`` document (``NAME.json``); only ``mappings`` is read back
DOCUMENT_KEYS = ("kernel", "params", "arch", "why", "mappings", "cost", "choice", "verification", "files",
                 "cache", "tuning", "numpy_mappings", "register_tiles")


def is_document(data: Any) -> bool:
    """Does ``data`` hold several mappings (``compile``'s ``NAME.json``) rather than one?"""
    return isinstance(data, dict) and "mappings" in data


def _sub_document(doc: YamlDocument, prefix: tuple) -> YamlDocument:
    """The entry at ``prefix`` as a document of its own, keeping the file's locations."""
    data: Any = doc.data
    for p in prefix:
        data = data[p]
    n = len(prefix)
    values = {path[n:]: loc for path, loc in doc.values.items() if path[:n] == prefix}
    keys = {path[n:]: loc for path, loc in doc.keys.items() if path[:n] == prefix}
    return YamlDocument(data, doc.source, values, keys)


def mappings_from_data(data: Any, *, kernel: ir.Kernel | ir.Program | Iterable[ir.Kernel], arch: Architecture,
                       source_name: str, document: YamlDocument | None = None) -> tuple[Mapping, ...]:
    """One mapping (a ``mapping.md`` file) or every mapping of a ``compile`` document, validated."""
    doc = document if document is not None else YamlDocument.of_data(data, source_name)
    if not is_document(data):
        return (mapping_from_dict(data, kernel=kernel, arch=arch, source_name=source_name, document=doc),)
    for key in data:
        if key not in DOCUMENT_KEYS:
            doc.fail((key,), f"unknown key '{key}' (a compile document has {', '.join(DOCUMENT_KEYS)})", key=True)
    entries = data["mappings"]
    if not isinstance(entries, list):
        doc.fail(("mappings",), "mappings: expected a list of mappings, one per mapped nest")
    out = []
    for k in range(len(entries)):
        sub = _sub_document(doc, ("mappings", k))
        out.append(mapping_from_dict(sub.data, kernel=kernel, arch=arch, source_name=source_name, document=sub))
    nests = [m.nest for m in out]
    if len(set(nests)) != len(nests):
        doc.fail(("mappings",), "mappings: two mappings of the same nest")
    return tuple(out)


def load_mappings(path: str | Path, *, kernel: ir.Kernel | ir.Program | Iterable[ir.Kernel],
                  arch: Architecture) -> tuple[Mapping, ...]:
    """Read and validate a mapping file or a ``compile`` document."""
    doc = read_yaml(path)
    return mappings_from_data(doc.data, kernel=kernel, arch=arch, source_name=str(path), document=doc)


def document_arch(path: str | Path) -> str | None:
    """The architecture a ``compile`` document names (``"arch": "host"``), or None."""
    data = read_yaml(path).data
    if is_document(data) and isinstance(data.get("arch"), str):
        return data["arch"]
    return None
