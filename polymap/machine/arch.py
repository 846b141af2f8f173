"""Architectures: a memory hierarchy over parallel compute units (``mapping.md``).

An architecture file (or a preset, ``toy``, ``eyeriss``, ``host``) becomes a
frozen :class:`Architecture`, outermost level first::

    levels: [{name: DRAM, read_energy: 200}, {name: RF, capacity: "1KiB", instances: 16}]
    compute: {instances: 16}
    ->
    Architecture("toy", (Level("DRAM", None, None, 1, 200.0, 0.0, None),
                         Level("RF", None, 1024, 16, 0.0, 0.0, None)), Compute(16, 1, 0.0, 1e9))

A capacity written as a number counts elements; a string with a unit counts
bytes. ``kB``/``MB``/``GB`` are decimal (1000), ``KiB``/``MiB``/``GiB``
binary (1024), as SI and IEC define them.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polymap.yamlsource import YamlDocument

_UNITS = {"B": 1, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]+)\s*$")

TOP_KEYS = ("name", "levels", "compute", "vector")
LEVEL_KEYS = ("name", "capacity", "instances", "read_energy", "write_energy", "bandwidth", "spatial_reduction")
COMPUTE_KEYS = ("instances", "ops_per_cycle", "energy", "frequency", "team_start_cycles", "barrier_cycles")
VECTOR_KEYS = ("isa", "bytes", "registers", "fma")
#: vector instruction sets, least first, with their register width in bytes
ISA_BYTES = {"scalar": 8, "sse": 16, "avx": 32, "avx2": 32, "avx512": 64}


@dataclass(frozen=True)
class Level:
    """One memory level. At most one capacity is set; neither for the (unbounded) backing store."""

    name: str
    capacity_elements: int | None = None
    capacity_bytes: int | None = None
    instances: int = 1
    read_energy: float = 0.0  # pJ per element read out of this level
    write_energy: float = 0.0  # pJ per element written into it
    bandwidth: float | None = None  # elements per cycle across its inner boundary, all instances
    #: An adder tree in the network below: under ``--convention timeloop`` partial sums of its
    #: spatial children arrive combined (one update per element and step).
    spatial_reduction: bool = False

    @property
    def bounded(self) -> bool:
        return self.capacity_elements is not None or self.capacity_bytes is not None

    def exceeded_by(self, elements: int, nbytes: int) -> bool:
        """Does a footprint of ``elements`` elements (``nbytes`` bytes with dtype sizes) overflow?"""
        if self.capacity_elements is not None:
            return elements > self.capacity_elements
        if self.capacity_bytes is not None:
            return nbytes > self.capacity_bytes
        return False

    def capacity_text(self) -> str:
        """``"16384 elements"``, ``"64 KiB"`` or ``"unbounded"``."""
        if self.capacity_elements is not None:
            return f"{self.capacity_elements} elements"
        if self.capacity_bytes is not None:
            return format_bytes(self.capacity_bytes, space=True)
        return "unbounded"


@dataclass(frozen=True)
class Compute:
    """The arithmetic units under the innermost level."""

    instances: int = 1
    ops_per_cycle: float = 1  # statement instances per unit per cycle
    energy: float = 0.0  # pJ per statement instance
    frequency: float = 1.0e9  # Hz
    # cycles a call's team of threads costs to start, and each further barrier (None: the model's assumed
    # execution.FORK_CYCLES / BARRIER_CYCLES); ``polymap calibrate`` writes the ones it measured (design.md)
    team_start_cycles: float | None = None
    barrier_cycles: float | None = None


@dataclass(frozen=True)
class VectorUnit:
    """The SIMD unit of a CPU: instruction set, register width and count, fused multiply-add.

    ``VectorUnit("avx512", 64, 32, True).lanes("f32") == 16``; ``"f64"`` halves it.
    """

    isa: str = "scalar"  # one of ISA_BYTES
    vector_bytes: int = 8
    registers: int = 16
    fma: bool = False

    def lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` per register (1 for a type that does not vectorise)."""
        size = {"f32": 4, "f64": 8, "i32": 4, "i64": 8}.get(dtype)
        return max(1, self.vector_bytes // size) if size else 1

    def to_dict(self) -> dict[str, Any]:
        return {"isa": self.isa, "bytes": self.vector_bytes, "registers": self.registers, "fma": self.fma}


@dataclass(frozen=True)
class Architecture:
    """A named hierarchy, outermost (backing store) first, over ``compute``; ``vector`` for CPUs."""

    name: str
    levels: tuple[Level, ...]
    compute: Compute
    vector: VectorUnit | None = None

    @property
    def level_names(self) -> tuple[str, ...]:
        return tuple(lv.name for lv in self.levels)

    def index(self, name: str) -> int:
        """Position of level ``name`` (0 is the backing store); ``KeyError`` if absent."""
        for k, lv in enumerate(self.levels):
            if lv.name == name:
                return k
        raise KeyError(name)

    def inner_instances(self, level_index: int) -> int:
        """Instances of what lies inside level ``level_index`` (the next level, or compute)."""
        if level_index + 1 < len(self.levels):
            return self.levels[level_index + 1].instances
        return self.compute.instances

    def to_dict(self) -> dict[str, Any]:
        """The architecture as its YAML file's data (round-trips through :func:`architecture_from_dict`)."""
        levels = []
        for lv in self.levels:
            d: dict[str, Any] = {"name": lv.name}
            if lv.capacity_elements is not None:
                d["capacity"] = lv.capacity_elements
            elif lv.capacity_bytes is not None:
                d["capacity"] = format_bytes(lv.capacity_bytes)
            d.update(instances=lv.instances, read_energy=lv.read_energy, write_energy=lv.write_energy)
            if lv.bandwidth is not None:
                d["bandwidth"] = lv.bandwidth
            if lv.spatial_reduction:
                d["spatial_reduction"] = True
            levels.append(d)
        c = self.compute
        out = {"name": self.name, "levels": levels,
               "compute": {"instances": c.instances, "ops_per_cycle": c.ops_per_cycle,
                           "energy": c.energy, "frequency": c.frequency}}
        for key in ("team_start_cycles", "barrier_cycles"):
            if getattr(c, key) is not None:
                out["compute"][key] = getattr(c, key)
        if self.vector is not None:
            out["vector"] = self.vector.to_dict()
        return out


# --------------------------------------------------------------------------- units


def parse_size(text: str) -> int | None:
    """``"64KiB"`` -> 65536, ``"32 kB"`` -> 32000; None when it does not parse or is fractional."""
    m = _SIZE.match(text)
    if m is None or m.group(2) not in _UNITS:
        return None
    value = float(m.group(1)) * _UNITS[m.group(2)]
    return int(value) if value == int(value) else None


def format_bytes(n: int, *, space: bool = False) -> str:
    """The exact size with the largest binary unit that divides it: 65536 -> ``"64KiB"``."""
    sep = " " if space else ""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        if n >= _UNITS[unit] and n % _UNITS[unit] == 0:
            return f"{n // _UNITS[unit]}{sep}{unit}"
    return f"{n}{sep}B"


# --------------------------------------------------------------------------- reading


def _number(doc: YamlDocument, path: tuple, value: Any, what: str) -> float:
    # PyYAML reads "1.0e9" (no sign in the exponent) as a string: accept numeric strings.
    if isinstance(value, bool):
        doc.fail(path, f"{what} must be a number, not {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        doc.fail(path, f"{what} must be a number, not {value!r}")
    # YAML's .nan and .inf pass every "< 0" test and poison every energy and cycle count.
    if not math.isfinite(number):
        doc.fail(path, f"{what} must be a finite number, not {value!r}")
    return value if isinstance(value, int) else number


def _count(doc: YamlDocument, path: tuple, value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        doc.fail(path, f"{what} must be a positive integer, not {value!r}")
    return value


def _keys(doc: YamlDocument, path: tuple, data: Any, allowed: tuple[str, ...], what: str) -> dict:
    if not isinstance(data, dict):
        doc.fail(path, f"{what} must be a mapping with keys {', '.join(allowed)}")
    for key in data:
        if key not in allowed:
            doc.fail(path + (key,), f"{what}: unknown key '{key}' (expected one of {', '.join(allowed)})", key=True)
    return data


def _capacity(doc: YamlDocument, path: tuple, value: Any, what: str) -> tuple[int | None, int | None]:
    if isinstance(value, str):
        size = parse_size(value)
        if size is None or size < 1:
            doc.fail(path, f"{what}: capacity '{value}' does not parse; write a number of elements "
                           "(16384) or a size in bytes with a unit (64KiB, 1MiB, 32kB, 512B)")
        return None, size
    return _count(doc, path, value, f"{what}: capacity"), None


def _level(doc: YamlDocument, k: int, data: Any) -> Level:
    path = ("levels", k)
    if not isinstance(data, dict):
        doc.fail(path, f"levels[{k}] must be a mapping with keys {', '.join(LEVEL_KEYS)}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        doc.fail(path, f"levels[{k}]: every level needs a 'name'")
    what = f"levels[{k}] ({name})"
    _keys(doc, path, data, LEVEL_KEYS, what)
    elements = nbytes = None
    if "capacity" in data:
        if k == 0:
            doc.fail(path + ("capacity",), f"{what}: the backing store holds every tensor; it takes no capacity")
        elements, nbytes = _capacity(doc, path + ("capacity",), data["capacity"], what)
    instances = _count(doc, path + ("instances",), data.get("instances", 1), f"{what}: instances")
    energies = []
    for key in ("read_energy", "write_energy"):
        e = _number(doc, path + (key,), data.get(key, 0), f"{what}: {key}")
        if e < 0:
            doc.fail(path + (key,), f"{what}: {key} is {e}; energies cannot be negative")
        energies.append(float(e))
    bandwidth = None
    if data.get("bandwidth") is not None:
        bandwidth = float(_number(doc, path + ("bandwidth",), data["bandwidth"], f"{what}: bandwidth"))
        if bandwidth <= 0:
            doc.fail(path + ("bandwidth",), f"{what}: bandwidth must be positive (leave it out for unbounded)")
    reduction = data.get("spatial_reduction", False)
    if not isinstance(reduction, bool):
        doc.fail(path + ("spatial_reduction",), f"{what}: spatial_reduction is true or false")
    return Level(name, elements, nbytes, instances, energies[0], energies[1], bandwidth, reduction)


def _compute(doc: YamlDocument, data: Any) -> Compute:
    data = _keys(doc, ("compute",), data, COMPUTE_KEYS, "compute")
    instances = _count(doc, ("compute", "instances"), data.get("instances", 1), "compute: instances")
    ops = _number(doc, ("compute", "ops_per_cycle"), data.get("ops_per_cycle", 1), "compute: ops_per_cycle")
    energy = _number(doc, ("compute", "energy"), data.get("energy", 0), "compute: energy")
    freq = _number(doc, ("compute", "frequency"), data.get("frequency", 1.0e9), "compute: frequency")
    if ops <= 0:
        doc.fail(("compute", "ops_per_cycle"), "compute: ops_per_cycle must be positive")
    if energy < 0:
        doc.fail(("compute", "energy"), f"compute: energy is {energy}; energies cannot be negative")
    if freq <= 0:
        doc.fail(("compute", "frequency"), "compute: frequency must be positive (in Hz)")
    team: list[float | None] = []
    for key in ("team_start_cycles", "barrier_cycles"):
        value = None
        if data.get(key) is not None:
            value = float(_number(doc, ("compute", key), data[key], f"compute: {key}"))
            if value < 0:
                doc.fail(("compute", key), f"compute: {key} is {value}; cycles cannot be negative")
        team.append(value)
    return Compute(instances, ops, float(energy), float(freq), team[0], team[1])


def _vector(doc: YamlDocument, data: Any) -> VectorUnit:
    data = _keys(doc, ("vector",), data, VECTOR_KEYS, "vector")
    isa = data.get("isa", "scalar")
    if isa not in ISA_BYTES:
        doc.fail(("vector", "isa"), f"vector: isa '{isa}' is not one of {', '.join(ISA_BYTES)}")
    nbytes = _count(doc, ("vector", "bytes"), data.get("bytes", ISA_BYTES[isa]), "vector: bytes")
    registers = _count(doc, ("vector", "registers"), data.get("registers", 16), "vector: registers")
    fma = data.get("fma", False)
    if not isinstance(fma, bool):
        doc.fail(("vector", "fma"), f"vector: fma must be true or false, not {fma!r}")
    return VectorUnit(isa, nbytes, registers, fma)


def _check_instances(doc: YamlDocument, levels: tuple[Level, ...], compute: Compute) -> None:
    if levels[0].instances != 1:
        doc.fail(("levels", 0, "instances"), f"levels[0] ({levels[0].name}): the backing store has one instance")
    chain = [(lv.name, lv.instances, ("levels", k, "instances")) for k, lv in enumerate(levels)]
    chain.append(("compute", compute.instances, ("compute", "instances")))
    for (oname, outer, _), (iname, inner, path) in zip(chain, chain[1:]):
        if inner % outer:
            doc.fail(path, f"{iname} has {inner} instances, not a multiple of the {outer} instances "
                           f"of the enclosing level {oname}")


def architecture_from_dict(data: Any, *, source_name: str, document: YamlDocument | None = None) -> Architecture:
    """Validate architecture-file data; a problem is a :class:`MappingError` at the entry."""
    doc = document if document is not None else YamlDocument.of_data(data, source_name)
    data = _keys(doc, (), data, TOP_KEYS, "architecture")
    levels_data = data.get("levels")
    if not isinstance(levels_data, list) or not levels_data:
        doc.fail(("levels",) if "levels" in data else (),
                 "architecture: 'levels' must list the memory levels, outermost (the backing store) first")
    levels = tuple(_level(doc, k, lv) for k, lv in enumerate(levels_data))
    seen: set[str] = set()
    for k, lv in enumerate(levels):
        if lv.name in seen:
            doc.fail(("levels", k, "name"), f"levels[{k}]: a second level named '{lv.name}'")
        seen.add(lv.name)
    compute = _compute(doc, data.get("compute", {}))
    _check_instances(doc, levels, compute)
    name = data.get("name", Path(source_name).stem)
    vector = _vector(doc, data["vector"]) if data.get("vector") is not None else None
    return Architecture(str(name), levels, compute, vector)

