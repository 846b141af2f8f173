"""``polymap arch [NAME|FILE] [--list] [--json]``: show an architecture or list the presets.

::

    $ polymap arch toy
    toy: 3 levels, 16 compute units x 1 op/cycle, 1 pJ/op, 1 GHz
    level  capacity        instances  read pJ  write pJ  bandwidth
    DRAM   unbounded               1      200       200  8 el/cycle
    ...
"""
from __future__ import annotations

import argparse
import json

from polymap import api
from polymap.machine.arch import Architecture
from polymap.errors import InputError

_ABOUT = {
    "host": "this machine: caches from /sys, cores x vector lanes as compute units",
    "toy": "the example of mapping.md: DRAM, a 16384-element buffer, 16 64-element register files",
    "eyeriss": "Eyeriss-like: DRAM, a 108 KiB global buffer, 12 x 14 PEs with private register files",
}


HOST_SOURCES = (
    "read from this machine: cache sizes and instances (/sys), usable CPUs (affinity), vector width "
    "(/proc/cpuinfo flags), clock (cpu MHz, nominal)\n"
    "assumed, not measured: every energy, every bandwidth (round numbers), 2 ops per cycle per lane\n"
    "measure them: polymap calibrate -o host.yaml (streaming bandwidths, FMA rate, fitted derating)")


def _num(x: float) -> str:
    return f"{x:g}"


def _hz(f: float) -> str:
    for unit, scale in (("GHz", 1e9), ("MHz", 1e6), ("kHz", 1e3)):
        if f >= scale:
            return f"{f / scale:.3g} {unit}"
    return f"{f:g} Hz"


def render(arch: Architecture) -> str:
    """The human-readable table of an architecture."""
    c = arch.compute
    head = (f"{arch.name}: {len(arch.levels)} levels, {c.instances} compute units x {_num(c.ops_per_cycle)} "
            f"op/cycle, {_num(c.energy)} pJ/op, {_hz(c.frequency)}")
    rows = [("level", "capacity", "instances", "read pJ", "write pJ", "bandwidth")]
    for lv in arch.levels:
        bw = f"{_num(lv.bandwidth)} el/cycle" if lv.bandwidth is not None else "unbounded"
        rows.append((lv.name, lv.capacity_text(), str(lv.instances), _num(lv.read_energy),
                     _num(lv.write_energy), bw))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    right = {2, 3, 4}  # numbers align right
    lines = [head]
    if arch.vector is not None:
        v = arch.vector
        lines.append(f"vector unit: {v.isa}, {v.registers} registers of {v.vector_bytes} bytes "
                     f"({v.lanes('f32')} x f32, {v.lanes('f64')} x f64){', FMA' if v.fma else ''}")
    for r in rows:
        cells = [cell.rjust(w) if k in right else cell.ljust(w) for k, (cell, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    if args.list:
        if args.json:
            print(json.dumps({"presets": [{"name": p, "description": _ABOUT.get(p, "")}
                                          for p in api.architecture_presets()]}, indent=2))
        else:
            width = max(len(p) for p in api.architecture_presets())
            for p in api.architecture_presets():
                print(f"{p.ljust(width)}  {_ABOUT.get(p, '')}")
        return 0
    if not args.name:
        raise InputError("polymap arch: give a preset name or an architecture file, or --list "
                         f"(presets: {', '.join(api.architecture_presets())})")
    arch = api.architecture(args.name, limits=args.limits)
    print(json.dumps(arch.to_dict(), indent=2) if args.json else render(arch))
    if args.name == "host" and not args.json:
        print(HOST_SOURCES)
    return 0
