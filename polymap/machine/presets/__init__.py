"""Named architectures: ``host`` (this machine) and the presets shipped as package data.

``load_architecture("toy")`` reads ``toy.yaml`` next to this file;
``load_architecture("host")`` asks :mod:`polymap.machine.hostinfo`, which
reads the operating system; any other spec is an architecture YAML file.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from polymap.errors import MappingError
from polymap.limits import Limits
from polymap.machine.arch import Architecture, architecture_from_dict
from polymap.machine.hostinfo import host_architecture
from polymap.yamlsource import parse_yaml, read_yaml

FILE_PRESETS = ("toy", "eyeriss")


def presets() -> tuple[str, ...]:
    """The names :func:`load_architecture` accepts instead of a file."""
    return ("host",) + FILE_PRESETS


def load_architecture(spec: str, *, limits: Limits | None = None) -> Architecture:
    """A preset (``host``, ``toy``, ``eyeriss``) or an architecture YAML file (read within ``limits``)."""
    if spec == "host":
        return host_architecture()
    if spec in FILE_PRESETS:
        text = resources.files("polymap.machine.presets").joinpath(f"{spec}.yaml").read_text()
        doc = parse_yaml(text, f"<preset {spec}>")
    else:
        if not Path(spec).exists() and "/" not in spec and not spec.endswith((".yaml", ".yml")):
            raise MappingError(f"{spec}: neither an architecture preset ({', '.join(presets())}) nor a file")
        doc = read_yaml(spec, limits=limits)
    return architecture_from_dict(doc.data, source_name=doc.source.name, document=doc)
