"""Architecture files, presets, the host read from the OS, and ``polymap arch``."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from polymap.machine.arch import (
    Architecture,
    Compute,
    Level,
    architecture_from_dict,
    parse_size,
)
from polymap.machine.presets import load_architecture, presets
from polymap.cli import main
from polymap.errors import MappingError
from polymap.machine.hostinfo import CacheInfo, HostInfo, host_architecture, host_info

TOY_TEXT = """\
name: toy
levels:
  - name: DRAM
    read_energy: 200
    write_energy: 200
    bandwidth: 8
  - name: GLB
    capacity: 16384
    instances: 1
    read_energy: 6
    write_energy: 6
    bandwidth: 32
  - name: RF
    capacity: 64
    instances: 16
    read_energy: 0.5
    write_energy: 0.5
compute:
  instances: 16
  ops_per_cycle: 1
  energy: 1.0
  frequency: 1.0e9
"""


def write(tmp_path: Path, text: str, name: str = "arch.yaml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def error_of(spec: str) -> MappingError:
    with pytest.raises(MappingError) as info:
        load_architecture(spec)
    return info.value


# --------------------------------------------------------------------------- presets


def test_presets_listed_and_load():
    assert set(presets()) >= {"host", "toy", "eyeriss"}
    for name in presets():
        arch = load_architecture(name)
        assert arch.levels[0].capacity_elements is None and arch.levels[0].capacity_bytes is None


def test_toy_is_the_spec_file():
    expected = Architecture("toy", (
        Level("DRAM", None, None, 1, 200.0, 200.0, 8.0),
        Level("GLB", 16384, None, 1, 6.0, 6.0, 32.0),
        Level("RF", 64, None, 16, 0.5, 0.5, None),
    ), Compute(16, 1, 1.0, 1e9))
    assert load_architecture("toy") == expected


def test_toy_file_equals_preset(tmp_path):
    assert load_architecture(write(tmp_path, TOY_TEXT)) == load_architecture("toy")


def test_eyeriss_shape():
    a = load_architecture("eyeriss")
    assert [lv.name for lv in a.levels] == ["DRAM", "GLB", "RF"]
    assert a.levels[1].capacity_bytes == 108 * 1024 and a.levels[1].instances == 1
    assert a.levels[2].instances == 12 * 14 == a.compute.instances
    assert a.levels[0].read_energy / a.levels[2].read_energy == 200
    assert a.levels[1].read_energy / a.levels[2].read_energy == 6


# --------------------------------------------------------------------------- host


def _sys_caches() -> dict[int, int]:
    """Level -> bytes of cpu0's data/unified caches, read here without polymap."""
    out = {}
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        if (d / "type").read_text().strip() == "Instruction":
            continue
        size = (d / "size").read_text().strip()
        mult = {"K": 1024, "M": 1024 ** 2}.get(size[-1], 1)
        out[int((d / "level").read_text())] = int(size.rstrip("KM")) * mult
    return out


def _sharing_groups(level: int) -> int:
    """How many distinct copies of a cache level the usable CPUs see."""
    groups = set()
    cpus = os.sched_getaffinity(0)
    for c in cpus:
        for d in Path(f"/sys/devices/system/cpu/cpu{c}/cache").glob("index*"):
            if int((d / "level").read_text()) == level and (d / "type").read_text().strip() != "Instruction":
                shared = set()
                for part in (d / "shared_cpu_list").read_text().strip().split(","):
                    lo, _, hi = part.partition("-")
                    shared.update(range(int(lo), int(hi or lo) + 1))
                groups.add(frozenset(shared & cpus))
    return len(groups)


@pytest.mark.skipif(not Path("/sys/devices/system/cpu/cpu0/cache").exists(), reason="no /sys cache info")
def test_host_reflects_sys():
    arch = load_architecture("host")
    caches = _sys_caches()
    by_name = {lv.name: lv for lv in arch.levels}
    for level, name in ((1, "L1"), (2, "L2"), (3, "LLC")):
        if level in caches:
            assert by_name[name].capacity_bytes == caches[level]
        else:
            assert name not in by_name
    cores = len(os.sched_getaffinity(0))
    for level, name in ((2, "L2"), (3, "LLC")):
        if level in caches:
            assert by_name[name].instances == _sharing_groups(level)
    flags = set(re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1).split())
    lanes = 16 if "avx512f" in flags else 8 if "avx" in flags else 4 if "sse" in flags else 1
    text = Path("/proc/cpuinfo").read_text()
    if "AuthenticAMD" in text and re.search(r"^cpu family\s*:\s*25$", text, re.M):
        lanes = min(lanes, 8)  # Zen 3/4: 256-bit FMA pipes, whatever the registers' width
    assert by_name["RF"].instances == cores
    assert by_name["RF"].capacity_bytes == (32 * 64 if "avx512f" in flags else 16 * 4 * lanes)
    assert arch.compute.instances == cores * lanes
    assert arch.compute.ops_per_cycle == 2
    names = [lv.name for lv in arch.levels]
    assert names[0] == "DRAM" and names[-1] == "RF"
    # round trip: the host is an ordinary architecture
    assert architecture_from_dict(arch.to_dict(), source_name="host") == arch


def _fake_sys(root: Path, cpus, caches) -> None:
    """/sys/devices/system/cpu lookalike: caches = [(level, type, size, shared)]."""
    for c in cpus:
        for k, (level, kind, size, shared) in enumerate(caches):
            d = root / f"cpu{c}" / "cache" / f"index{k}"
            d.mkdir(parents=True)
            for f, v in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
                (d / f).write_text(f"{v}\n")


def test_host_without_l3(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    own = {c: str(c) for c in cpus}
    root = tmp_path / "cpu"
    for c in cpus:
        _fake_sys(root, [c], [(1, "Data", "48K", own[c]), (1, "Instruction", "32K", own[c]),
                              (2, "Unified", "2048K", own[c])])
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\ncpu MHz\t\t: 3000.000\nflags\t\t: fpu sse sse2 avx avx2 avx512f\n")
    info = host_info(root, cpuinfo)
    arch = host_architecture(info)
    assert [lv.name for lv in arch.levels] == ["DRAM", "L2", "L1", "RF"]
    assert arch.levels[1].capacity_bytes == 2 * 2 ** 20 and arch.levels[1].instances == len(cpus)
    assert arch.levels[2].capacity_bytes == 48 * 1024
    assert arch.levels[3].capacity_bytes == 2048  # 32 zmm registers of 64 bytes
    assert arch.compute.instances == 16 * len(cpus)
    assert arch.compute.frequency == 3.0e9


def test_host_missing_everything(tmp_path):
    info = host_info(tmp_path / "nothing", tmp_path / "nocpuinfo")
    arch = host_architecture(info)
    assert [lv.name for lv in arch.levels] == ["DRAM", "RF"]
    assert arch.compute.frequency == 2e9


def test_host_divisibility_repaired():
    # 6 CPUs, an L2 shared by odd groups: 4 copies cannot sit under 1 LLC and over 6 L1s.
    info = HostInfo(6, (CacheInfo(1, 32768, 6), CacheInfo(2, 2 ** 20, 4), CacheInfo(3, 2 ** 25, 1)), 32, 16, 1e9)
    arch = host_architecture(info)
    inst = [lv.instances for lv in arch.levels] + [arch.compute.instances]
    assert all(b % a == 0 for a, b in zip(inst, inst[1:]))


# --------------------------------------------------------------------------- units


@pytest.mark.parametrize("text,value", [("64KiB", 65536), ("1MiB", 2 ** 20), ("32KB", 32000), ("32kB", 32000),
                                        ("512B", 512), ("1.5KiB", 1536), ("2 GiB", 2 * 2 ** 30)])
def test_sizes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["64", "64 KX", "KiB", "1.3B", "-4KiB", "64kib"])
def test_bad_sizes(text):
    assert parse_size(text) is None


def test_capacity_number_counts_elements_string_bytes(tmp_path):
    a = load_architecture(write(tmp_path, "levels:\n  - name: D\n  - name: B\n    capacity: 4096\n"
                                          "  - name: R\n    capacity: 64KiB\n"))
    assert (a.levels[1].capacity_elements, a.levels[1].capacity_bytes) == (4096, None)
    assert (a.levels[2].capacity_elements, a.levels[2].capacity_bytes) == (None, 65536)
    assert a.levels[2].exceeded_by(10, 65537) and not a.levels[2].exceeded_by(10 ** 6, 65536)
    assert a.compute == Compute()  # defaults


# --------------------------------------------------------------------------- errors


BAD = [
    ("levels:\n  - name: DRAM\n    colour: red\n", "unknown key 'colour'", 3, "levels[0] (DRAM)"),
    ("name: x\n", "'levels' must list", None, "architecture"),
    ("levels: []\n", "'levels' must list", 1, "architecture"),
    ("levels:\n  - name: D\n  - name: G\n    read_energy: -1\n", "cannot be negative", 4, "levels[1] (G)"),
    ("levels:\n  - name: D\n  - name: G\n    instances: 4\n  - name: R\n    instances: 6\n",
     "not a multiple", 6, "R has 6 instances"),
    ("levels:\n  - name: D\n  - name: R\n    instances: 4\ncompute:\n  instances: 6\n",
     "not a multiple", 6, "compute has 6 instances"),
    ("levels:\n  - name: D\n  - name: G\n    capacity: 12 parsecs\n", "does not parse", 4, "levels[1] (G)"),
    ("levels:\n  - name: D\n  - name: G\n    capacity: 0\n", "positive integer", 4, "levels[1] (G)"),
    ("levels:\n  - name: D\n    capacity: 100\n", "backing store", 3, "levels[0] (D)"),
    ("levels:\n  - name: D\n  - name: D\n", "second level", 3, "levels[1]"),
    ("levels:\n  - name: D\ncompute:\n  speed: 3\n", "unknown key 'speed'", 4, "compute"),
    ("levels:\n  - name: D\ncompute:\n  energy: -2\n", "cannot be negative", 4, "compute"),
    ("levels:\n  - name: D\ncompute:\n  team_start_cycles: -5\n", "cannot be negative", 4, "compute"),
    ("levels:\n  - name: D\ncompute:\n  barrier_cycles: many\n", "must be a number", 4, "compute"),
    ("levels:\n  - {name: D, instances: 2}\n", "one instance", 2, "levels[0] (D)"),
    ("levels:\n  - name: D\n    bandwidth: fast\n", "must be a number", 3, "levels[0] (D)"),
    ("levels:\n  - read_energy: 1\n", "needs a 'name'", 2, "levels[0]"),
    ("levels: [\n  - name: D\n", "not valid YAML", None, ""),
]


@pytest.mark.parametrize("text,what,line,entry", BAD)
def test_errors_name_file_entry_and_line(tmp_path, text, what, line, entry):
    path = write(tmp_path, text)
    err = error_of(path)
    d = err.diagnostics[0]
    assert what in d.message and entry in d.message
    assert d.loc is not None and d.loc.filename == path
    if line is not None:
        assert d.loc.line == line
    assert path in err.render()


def test_unreadable_and_unknown(tmp_path):
    err = error_of(str(tmp_path / "missing.yaml"))
    assert "cannot read" in err.render() and "missing.yaml" in err.render()
    assert "neither an architecture preset" in error_of("nosuchpreset").render()


def test_from_dict_without_text_names_source():
    with pytest.raises(MappingError) as info:
        architecture_from_dict({"levels": [{"name": "D", "read_energy": -3}]}, source_name="given.yaml")
    assert info.value.render().startswith("given.yaml: error: levels[0] (D)")


def test_round_trip_through_yaml():
    for name in ("toy", "eyeriss"):
        a = load_architecture(name)
        again = architecture_from_dict(yaml.safe_load(yaml.safe_dump(a.to_dict())), source_name="x")
        assert again == a


def test_the_team_costs_are_optional_and_round_trip():
    """``compute.team_start_cycles`` and ``barrier_cycles`` (what ``polymap calibrate`` measured) read
    back as written; without them the model's assumed costs apply (None)."""
    import dataclasses
    a = load_architecture("host")
    assert (a.compute.team_start_cycles, a.compute.barrier_cycles) == (None, None)
    assert "team_start_cycles" not in a.to_dict()["compute"]
    b = dataclasses.replace(a, compute=dataclasses.replace(a.compute, team_start_cycles=123456.0, barrier_cycles=789.0))
    again = architecture_from_dict(yaml.safe_load(yaml.safe_dump(b.to_dict())), source_name="x")
    assert again == b


# --------------------------------------------------------------------------- command


def test_cli_arch(capsys):
    assert main(["arch", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(p in out for p in presets())
    assert main(["arch", "toy", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert architecture_from_dict(doc, source_name="json") == load_architecture("toy")
    assert main(["arch", "eyeriss"]) == 0
    out = capsys.readouterr().out
    assert "108 KiB" in out and "168" in out and "unbounded" in out
    assert main(["arch", "nosuch"]) == 2
    assert main(["arch"]) == 2


@pytest.mark.parametrize("flags,isa,nbytes,regs", [
    ("fpu sse sse2 avx avx2 fma avx512f avx512bw avx512dq avx512vl", "avx512", 64, 32),
    ("fpu sse sse2 avx avx2 fma", "avx2", 32, 16),
    ("fpu sse sse2 avx", "avx", 32, 16),
    ("fpu sse sse2", "sse", 16, 16),
    ("fpu", "scalar", 8, 16)])
def test_host_vector_unit(tmp_path, flags, isa, nbytes, regs):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    arch = host_architecture(host_info(tmp_path / "nothing", cpuinfo))
    v = arch.vector
    assert (v.isa, v.vector_bytes, v.registers, v.fma) == (isa, nbytes, regs, "fma" in flags.split())
    assert v.lanes("f32") == max(1, nbytes // 4) and v.lanes("f64") == max(1, nbytes // 8)
    assert architecture_from_dict(arch.to_dict(), source_name="host") == arch


@pytest.mark.parametrize("vendor,family,units,l1", [
    ("AuthenticAMD", 25, 8, 16),   # Zen 4: zmm registers, 512-bit FMAs issued as two 256-bit halves
    ("AuthenticAMD", 26, 16, 32),  # Zen 5: 512-bit pipes
    ("GenuineIntel", 6, 16, 32)])  # assumed full width (calibrate's FMA loop measures it)
def test_host_computes_at_the_width_of_its_fma_pipes(tmp_path, vendor, family, units, l1):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\n"
                       "flags\t\t: fpu sse sse2 avx avx2 fma avx512f\n")
    root = tmp_path / "cpu"
    _fake_sys(root, [0], [(1, "Data", "32K", "0")])
    info = host_info(root, cpuinfo)
    arch = host_architecture(info)
    cpus = info.cpus
    # the registers stay 64 bytes (the code uses zmm registers either way); the units are pipe lanes
    assert arch.vector.vector_bytes == 64 and arch.vector.lanes("f32") == 16
    assert arch.compute.instances == cpus * units and arch.compute.ops_per_cycle == 2
    assert {lv.name: lv.bandwidth for lv in arch.levels}["L1"] == l1 * arch.levels[-2].instances


def test_vector_unit_bad_isa():
    with pytest.raises(MappingError, match="isa 'avx9'"):
        architecture_from_dict({"levels": [{"name": "DRAM"}], "vector": {"isa": "avx9"}}, source_name="x")
