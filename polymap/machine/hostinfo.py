"""The ``host`` preset: this machine's memory hierarchy, read from the operating system.

Caches come from ``/sys/devices/system/cpu/cpuN/cache/index*/{level,type,size,
shared_cpu_list}``, the usable CPUs from ``sched_getaffinity``, the vector
width from the ``flags`` line of ``/proc/cpuinfo`` and the clock from its
``cpu MHz``; the vector instruction set (SSE, AVX, AVX2, AVX-512 with
F/BW/DQ/VL, FMA), its register width and count from the same flags. A
two-core AVX2 machine with 32 KiB L1d, 512 KiB L2 and a shared
32 MiB L3 becomes::

    DRAM (backing store) -> LLC 32MiB x1 -> L2 512KiB x2 -> L1 32KiB x2 -> RF 512B x2
    compute: 2 cores x 8 fp32 lanes = 16 units, 2 ops (FMA) per cycle
    vector:  VectorUnit("avx2", 32, 16, fma=True)   (lanes("f32") == 8, lanes("f64") == 4)

A level the machine lacks (no L3) is left out. Energies and bandwidths are
plausible round numbers, not measurements.

The compute units are the lanes of the FMA *pipes*, not of the ISA's
registers (:func:`fma_pipe_bytes`): AMD's Zen 4 (family 25) runs AVX-512 on
two 256-bit FMA pipes, a 512-bit FMA taking both halves, so a core issues
2 x 8 f32 FMAs a cycle, not 2 x 16 (the register width stays 64 bytes: the
code still uses zmm registers). The same for the L1's bandwidth (two loads a
cycle of the pipes' width). On this machine::

    compute: 2 cores x 8 fp32 pipe lanes = 16 units, 2 ops (FMA) per cycle   (32 FMA/cycle)
    vector:  VectorUnit("avx512", 64, 32, fma=True)

What is read and what is assumed: caches, CPUs, ISA, registers and clock are
read; the pipe width is a rule by vendor and family (assumed where the rule
does not know the core: the register width); two FMA pipes, the bandwidths
and energies are assumed. ``polymap calibrate`` measures the bandwidths and
the FMA rate (its FMA loop: independent chains in registers on every thread)
and writes them over these. The team's start and barrier cycles the model
charges two-thread code (``execution.FORK_CYCLES``, ``BARRIER_CYCLES``) are
constants (the start what calibrate measured on the session-26-29 Xeon VM,
the barrier assumed); calibrate measures the bare ones and writes them into its
architecture (``compute.team_start_cycles``, ``barrier_cycles``), unfitted.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from math import gcd
from pathlib import Path

from polymap.machine.arch import Architecture, Compute, Level, VectorUnit

SYS_CPU = Path("/sys/devices/system/cpu")
CPUINFO = Path("/proc/cpuinfo")
#: pJ per element moved, read or write (RF, L1, L2, LLC, DRAM).
ENERGY = {"RF": 0.1, "L1": 0.5, "L2": 2.0, "LLC": 8.0, "DRAM": 100.0}
FMA_ENERGY = 0.5


@dataclass(frozen=True)
class CacheInfo:
    """One data (or unified) cache as CPU 0 sees it, with how many copies the usable CPUs have."""

    level: int
    size_bytes: int
    instances: int


@dataclass(frozen=True)
class HostInfo:
    """What the ``host`` preset is built from."""

    cpus: int
    caches: tuple[CacheInfo, ...]  # innermost first: L1, L2, L3
    vector_bytes: int  # one SIMD register
    vector_registers: int
    frequency: float  # Hz
    isa: str = ""  # "avx512", "avx2", "avx", "sse", "scalar"; "" derives it from vector_bytes
    fma: bool = False
    pipe_bytes: int | None = None  # width of the FMA pipes (None: the register width, vector_bytes)

    @property
    def pipe_lanes(self) -> int:
        """f32 lanes a pipe computes per issue: ``min(register, pipe width) / 4``."""
        return min(self.vector_bytes, self.pipe_bytes or self.vector_bytes) // 4

    @property
    def vector(self) -> VectorUnit:
        isa = self.isa or {64: "avx512", 32: "avx2", 16: "sse"}.get(self.vector_bytes, "scalar")
        return VectorUnit(isa, self.vector_bytes, self.vector_registers, self.fma)


def parse_size(text: str) -> int:
    """``"32K"`` -> 32768 (the /sys notation: K, M, G are binary)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)B?\s*", text)
    if m is None:
        raise ValueError(f"cache size {text!r}")
    return int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]


def parse_cpu_list(text: str) -> frozenset[int]:
    """``"0-3,8"`` -> {0, 1, 2, 3, 8}."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def usable_cpus() -> frozenset[int]:
    """The CPUs this process may run on."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset(range(os.cpu_count() or 1))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cpu_caches(root: Path, cpu: int) -> dict[int, tuple[int, frozenset[int]]]:
    """Level -> (size, sharing CPUs) for CPU ``cpu``'s data and unified caches."""
    out = {}
    for index in sorted((root / f"cpu{cpu}" / "cache").glob("index*")):
        level, kind, size = (_read(index / f) for f in ("level", "type", "size"))
        shared = _read(index / "shared_cpu_list")
        if None in (level, kind, size) or kind == "Instruction":
            continue
        try:
            out[int(level)] = (parse_size(size), parse_cpu_list(shared or str(cpu)))
        except ValueError:
            continue  # an unreadable entry: leave that level out rather than guess
    return out


def read_caches(cpus: frozenset[int], root: Path = SYS_CPU) -> tuple[CacheInfo, ...]:
    """The caches of the first usable CPU, innermost first, each with its copy count.

    A cache's instances are the distinct groups of usable CPUs that share one.
    """
    first = min(cpus)
    mine = _cpu_caches(root, first)
    per_cpu = {c: _cpu_caches(root, c) for c in sorted(cpus)}
    out = []
    for level in sorted(mine):
        groups = {per_cpu[c][level][1] & cpus for c in cpus if level in per_cpu[c]}
        out.append(CacheInfo(level, mine[level][0], max(1, len(groups))))
    return tuple(out)


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The feature flags of the first processor in ``/proc/cpuinfo`` text."""
    m = re.search(r"^flags\s*:(.*)$", cpuinfo, re.MULTILINE)
    return frozenset(m.group(1).split()) if m else frozenset()


def vector_isa(flags: frozenset[str]) -> str:
    """The widest vector instruction set the flags show: ``avx512``, ``avx2``, ``avx``, ``sse`` or ``scalar``.

    ``avx512`` needs only the foundation (``avx512f``): the register tiles use
    512-bit FMAs and masked loads and stores of f32/f64, all in AVX-512F.
    """
    if "avx512f" in flags:
        return "avx512"
    for isa in ("avx2", "avx"):
        if isa in flags:
            return isa
    return "sse" if "sse" in flags or "sse2" in flags else "scalar"


def vector_registers(flags: frozenset[str]) -> tuple[int, int]:
    """(bytes per SIMD register, number of registers) from the CPU flags."""
    if "avx512f" in flags:
        return 64, 32
    if "avx" in flags or "avx2" in flags:
        return 32, 16
    if "sse" in flags or "sse2" in flags:
        return 16, 16
    return 8, 16  # general-purpose registers only


def fma_pipe_bytes(cpuinfo: str, vector_bytes: int) -> int:
    """Width in bytes of the FMA pipes, from the vendor and family of ``/proc/cpuinfo`` text.

    AMD family 25 (Zen 3, Zen 4) has 256-bit FMA pipes: Zen 4 splits a 512-bit FMA into two
    halves, so its zmm registers carry 16 f32 lanes but a pipe computes 8. Every other core is
    assumed to compute its full register width (Intel's server cores with two 512-bit FMA units,
    AMD's Zen 5); ``polymap calibrate``'s FMA loop measures what it really does.
    """
    vendor = re.search(r"^vendor_id\s*:\s*(\S+)", cpuinfo, re.MULTILINE)
    family = re.search(r"^cpu family\s*:\s*(\d+)", cpuinfo, re.MULTILINE)
    if vendor and family and vendor.group(1) == "AuthenticAMD" and int(family.group(1)) == 25:
        return min(vector_bytes, 32)
    return vector_bytes


def cpu_frequency(cpuinfo: str) -> float:
    """The clock in Hz from the first ``cpu MHz`` line, or 2 GHz when there is none."""
    m = re.search(r"^cpu MHz\s*:\s*([0-9.]+)", cpuinfo, re.MULTILINE)
    return float(m.group(1)) * 1e6 if m else 2.0e9


def host_info(root: Path = SYS_CPU, cpuinfo: Path = CPUINFO) -> HostInfo:
    """Read the machine; missing files give fewer levels or defaults, never an error."""
    cpus = usable_cpus()
    text = _read(cpuinfo) or ""
    flags = cpu_flags(text)
    width, count = vector_registers(flags)
    isa = vector_isa(flags)
    return HostInfo(len(cpus), read_caches(cpus, root), width, count, cpu_frequency(text),
                    isa, "fma" in flags, fma_pipe_bytes(text, width))


def host_architecture(info: HostInfo | None = None) -> Architecture:
    """The ``host`` preset: DRAM, LLC (L3), L2, L1, RF over cores x fp32 lanes."""
    info = info if info is not None else host_info()
    lanes = info.pipe_lanes  # what a pipe computes (Zen 4: 8 f32 of a 16-lane zmm register)
    caches = {c.level: c for c in info.caches if c.level in (1, 2, 3)}
    # Aggregate elements per cycle across each level's inner boundary, per copy of the level.
    per_copy = {"DRAM": 4, "LLC": 8, "L2": 16, "L1": 2 * lanes}
    levels = [Level("DRAM", read_energy=ENERGY["DRAM"], write_energy=ENERGY["DRAM"], bandwidth=float(per_copy["DRAM"]))]
    for lvl, name in ((3, "LLC"), (2, "L2"), (1, "L1")):
        if lvl in caches:
            c = caches[lvl]
            levels.append(Level(name, None, c.size_bytes, c.instances, ENERGY[name], ENERGY[name],
                                float(per_copy[name] * c.instances)))
    levels.append(Level("RF", None, info.vector_registers * info.vector_bytes, info.cpus,
                        ENERGY["RF"], ENERGY["RF"], None))
    levels = _divisible(levels)
    compute = Compute(info.cpus * lanes, 2, FMA_ENERGY, info.frequency)
    return Architecture("host", tuple(levels), compute, info.vector)


def _divisible(levels: list[Level]) -> list[Level]:
    """Make each level's instances divide the next inner level's (odd affinity masks can break it)."""
    out = list(levels)
    for k in range(len(out) - 2, -1, -1):
        inner = out[k + 1].instances
        if inner % out[k].instances:
            lv = out[k]
            out[k] = Level(lv.name, lv.capacity_elements, lv.capacity_bytes, gcd(lv.instances, inner),
                           lv.read_energy, lv.write_energy, lv.bandwidth)
    return out
