"""Timeloop architectures (v0.4 ``!Container``/``!Component`` trees, or the older ``subtree``/``local``
form) as polymap architectures.

Before (v0.4)::

    architecture:
      version: 0.4
      nodes:
        - !Container {name: System, attributes: {datawidth: 8}}
        - !Component {name: MainMemory, class: DRAM, attributes: {width: 64, datawidth: 8}}
        - !Container {name: PE, spatial: {meshX: 4}}
        - !Component {name: Buffer, class: storage, attributes: {depth: 16, width: 32, datawidth: 8}}
        - !Component {name: MACC, class: compute, attributes: {datawidth: 8}}

After: ``levels: [MainMemory, Buffer (capacity 64 = 16 x 32 / 8, instances 4)]``,
``compute: {instances: 4}``. Storage components are levels in the order
written (outermost first; the first is the backing store); a component whose
class names arithmetic (``mac``, ``compute``, ``alu``) is the compute unit.
Instances multiply the ``meshX x meshY`` of every enclosing container (and of
the component itself); in the older form a name ``PE[0..15]`` gives 16.
Capacity in elements is ``depth x width / datawidth`` (or ``size``/``entries``
in words); ``read_bandwidth`` (words per cycle) becomes the bandwidth;
``spatial_reduction: true`` is kept. Energies come from Accelergy in
Timeloop and are not in these files: they are 0 unless the component gives
``read_energy``/``write_energy`` (pJ per word).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from polymap.yamlsource import YamlDocument

_RANGE = re.compile(r"^(.*)\[(\d+)\.\.(\d+)\]$")
_COMPUTE = ("mac", "compute", "alu", "fpu", "multiplier", "adder")


@dataclass
class Component:
    name: str
    cls: str
    attributes: dict
    instances: int
    path: tuple


@dataclass
class TimeloopArch:
    name: str
    storage: list[Component] = field(default_factory=list)
    compute: Component | None = None


def read_arch(doc: YamlDocument, tags: dict[tuple, str], fallback_name: str) -> TimeloopArch:
    data = doc.data
    if not isinstance(data, dict) or not isinstance(data.get("architecture"), dict):
        doc.fail((), "a Timeloop architecture file needs a top-level 'architecture:' mapping")
    a = data["architecture"]
    arch = TimeloopArch(fallback_name)
    if isinstance(a.get("nodes"), list):
        _nodes(doc, tags, a["nodes"], ("architecture", "nodes"), arch)
    elif isinstance(a.get("subtree"), list):
        for k, sub in enumerate(a["subtree"]):
            _subtree(doc, sub, ("architecture", "subtree", k), 1, arch)
    else:
        doc.fail(("architecture",), "the architecture needs 'nodes:' (v0.4) or 'subtree:' (older form)")
    if not arch.storage:
        doc.fail(("architecture",), "the architecture has no storage component")
    return arch


def _mesh(spec: object) -> int:
    if not isinstance(spec, dict):
        return 1
    return int(spec.get("meshX", 1)) * int(spec.get("meshY", 1))


def _add(doc: YamlDocument, arch: TimeloopArch, node: dict, path: tuple, instances: int) -> None:
    name = node.get("name")
    if not isinstance(name, str):
        doc.fail(path, "a component needs a 'name'")
    attrs = node.get("attributes") or {}
    if not isinstance(attrs, dict):
        doc.fail(path + ("attributes",), "'attributes' must be a mapping")
    cls = str(node.get("class", "")).lower()
    m = _RANGE.match(name)
    if m:
        name, instances = m.group(1), instances * (int(m.group(3)) - int(m.group(2)) + 1)
    if "instances" in attrs:
        instances = int(attrs["instances"])
    comp = Component(name, cls, attrs, instances, path)
    if any(word in cls for word in _COMPUTE):
        if arch.compute is not None:
            doc.fail(path, f"a second compute component ('{name}'): polymap models one kind of arithmetic unit")
        arch.compute = comp
    else:
        if arch.compute is not None:
            doc.fail(path, f"storage '{name}' below the compute unit '{arch.compute.name}'")
        arch.storage.append(comp)


def _nodes(doc: YamlDocument, tags: dict[tuple, str], nodes: list, path: tuple, arch: TimeloopArch) -> None:
    instances = 1
    for k, node in enumerate(nodes):
        where = path + (k,)
        if not isinstance(node, dict):
            doc.fail(where, "a node is a !Container or a !Component mapping")
        tag = tags.get(where, "!Component" if "class" in node else "!Container")
        if tag == "!Container":
            if k == 0 and isinstance(node.get("name"), str):
                arch.name = node["name"]
            instances *= _mesh(node.get("spatial"))
        elif tag == "!Component":
            _add(doc, arch, node, where, instances * _mesh(node.get("spatial")))
        else:
            doc.fail(where, f"{tag} nodes are not supported (only !Container and !Component)")


def _subtree(doc: YamlDocument, sub: object, path: tuple, instances: int, arch: TimeloopArch) -> None:
    if not isinstance(sub, dict):
        doc.fail(path, "a subtree entry is a mapping with 'name', 'local' and 'subtree'")
    name = str(sub.get("name", ""))
    m = _RANGE.match(name)
    if m:
        instances *= int(m.group(3)) - int(m.group(2)) + 1
    elif path == ("architecture", "subtree", 0) and name:
        arch.name = name
    for k, node in enumerate(sub.get("local") or []):
        _add(doc, arch, node, path + ("local", k), instances)
    for k, child in enumerate(sub.get("subtree") or []):
        _subtree(doc, child, path + ("subtree", k), instances, arch)


def capacity(comp: Component) -> int | None:
    """Elements one instance holds: depth x width / datawidth, or size / entries (None: unbounded)."""
    a = comp.attributes
    for key in ("size", "entries"):
        if key in a:
            return int(a[key])
    if "depth" in a:
        width, datawidth = int(a.get("width", a.get("datawidth", 1))), int(a.get("datawidth", 1))
        return int(a["depth"]) * max(width // max(datawidth, 1), 1)
    return None


def polymap_levels(arch: TimeloopArch) -> list[dict]:
    out = []
    for k, comp in enumerate(arch.storage):
        level: dict = {"name": comp.name}
        cap = capacity(comp)
        if k > 0 and cap is not None:
            level["capacity"] = cap
        if comp.instances != 1:
            level["instances"] = comp.instances
        for key in ("read_energy", "write_energy"):
            if key in comp.attributes:
                level[key] = float(comp.attributes[key])
        if "read_bandwidth" in comp.attributes:
            level["bandwidth"] = float(comp.attributes["read_bandwidth"])
        if comp.attributes.get("spatial_reduction") or comp.attributes.get("spatial-reduction"):
            level["spatial_reduction"] = True
        out.append(level)
    return out
