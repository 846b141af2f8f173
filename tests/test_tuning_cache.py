"""The tuning cache: keys (normalised text, architecture, bucket), tampering, concurrency, re-checks."""
from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from polymap import api
from polymap.cli import main
from polymap.driver import parse
from polymap.machine.presets import load_architecture
from polymap.machine.hostinfo import CacheInfo
from polymap.passes.search.cache import (
    TuningCache,
    arch_fingerprint,
    bucket_of,
    cache_key,
    host_fingerprint,
    processor_model,
    shape_bucket,
)
from polymap.passes.search.remember import recall
from polymap.passes.search.tune import TuneOptions, TunedChoice, tune_choice
from polymap.passes.search.choice import ChoiceOptions, choose

GEMM = """
# C = A @ B
kernel gemm(M = 16, N = 16, K = 16) {
  in    A[M, K] : f32
  in    B[K, N] : f32
  out   C[M, N] : f32

  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""

# the same kernel: other comments, blank lines and spacing
GEMM_RESPACED = """kernel gemm(M = 16, N = 16, K = 16) {   # a comment
  in A[M, K] : f32


  in    B[K, N]   : f32
  out   C[M, N] : f32
  for i in 0..M, j in 0..N {
    init:   C[i, j] = 0     # zero first
    for k in 0..K { acc: C[i, j] += A[i, k] * B[k, j] }
  }
}
"""

SEIDEL = """
kernel seidel(T = 4, N = 16) {
  inout A[N, N] : f64
  for t in 0..T, i in 1..N - 1, j in 1..N - 1 {
    relax: A[i, j] = (A[i - 1, j] + A[i, j - 1] + A[i, j] + A[i + 1, j] + A[i, j + 1]) / 5.0
  }
}
"""


def kernel_of(text: str):
    return parse(text).kernels[0]


@pytest.mark.parametrize("value, bucket", [(1, 1), (2, 2), (3, 4), (16, 16), (17, 32), (1000, 1024),
                                           (1024, 1024), (1025, 2048)])
def test_buckets_round_up_to_powers_of_two(value, bucket):
    assert bucket_of(value) == bucket


def test_keys_normalise_text_and_separate_what_differs():
    a, b = kernel_of(GEMM), kernel_of(GEMM_RESPACED)
    key = cache_key(a, "arch-x", {"M": 16, "N": 16, "K": 16})
    assert cache_key(b, "arch-x", {"M": 16, "N": 16, "K": 16}).digest() == key.digest()
    assert cache_key(a, "arch-x", {"M": 9, "N": 13, "K": 16}).digest() == key.digest()  # same bucket
    assert cache_key(a, "arch-x", {"M": 17, "N": 16, "K": 16}).digest() != key.digest()
    assert cache_key(a, "arch-y", {"M": 16, "N": 16, "K": 16}).digest() != key.digest()
    other = kernel_of(GEMM.replace("A[i, k] * B[k, j]", "A[i, k] * B[k, j] * 2.0"))
    assert cache_key(other, "arch-x", {"M": 16, "N": 16, "K": 16}).digest() != key.digest()
    assert shape_bucket({"N": 5, "M": 1}) == (("M", 1), ("N", 8))


def test_architecture_fingerprints(tmp_path):
    cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 9B14\ncpu MHz\t\t: 2596.1\n"
    assert processor_model(cpuinfo) == "AMD EPYC 9B14"
    caches = (CacheInfo(1, 49152, 2), CacheInfo(2, 1 << 20, 2))
    assert host_fingerprint("AMD EPYC 9B14", caches) == "host:AMD EPYC 9B14;L1=49152x2,L2=1048576x2"
    assert host_fingerprint("AMD EPYC 9B14", caches[:1]) != host_fingerprint("AMD EPYC 9B14", caches)
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    text = (Path(__file__).parent.parent / "polymap" / "machine" / "presets" / "toy.yaml").read_text()
    first.write_text(text)
    second.write_text(text)
    assert arch_fingerprint(str(first)) == arch_fingerprint(str(second)) == arch_fingerprint("toy")
    second.write_text(text.replace("capacity: 64", "capacity: 128"))
    assert arch_fingerprint(str(second)) != arch_fingerprint(str(first))
    assert arch_fingerprint("host").startswith("host:")


def _entry(source: str) -> dict:
    return {"kernel": "gemm", "k": 2, "params": {}, "nests": [{"nest": 0, "source": source, "mapping": None,
                                                               "measured_s": 1.0}], "tuning": []}


def test_store_and_load_round_trip_and_refuse_damage(tmp_path):
    cache = TuningCache(tmp_path)
    key = cache_key(kernel_of(GEMM), "arch", {"M": 16})
    assert cache.load(key).entry is None and not cache.load(key).warnings  # nothing yet: a plain miss
    path = cache.store(key, _entry("search #1"))
    assert cache.load(key).entry == _entry("search #1")
    data = json.loads(path.read_text())
    data["entry"]["nests"][0]["source"] = "edited"  # tampered, checksum left alone
    path.write_text(json.dumps(data))
    loaded = cache.load(key)
    assert loaded.entry is None and "checksum" in loaded.warnings[0]
    path.write_text(path.read_text()[:40])  # truncated
    loaded = cache.load(key)
    assert loaded.entry is None and "damaged" in loaded.warnings[0]
    other = cache_key(kernel_of(GEMM), "other arch", {"M": 16})
    cache.store(other, _entry("x"))
    cache.path(other).replace(path)  # another key's (valid) entry under this key's name
    loaded = cache.load(key)
    assert loaded.entry is None and "another" in loaded.warnings[0]


def _writer(directory: str, source: str, rounds: int) -> None:
    cache = TuningCache(Path(directory))
    key = cache_key(kernel_of(GEMM), "arch", {"M": 16})
    for _ in range(rounds):
        cache.store(key, _entry(source))


def test_two_processes_writing_at_once_leave_a_whole_entry(tmp_path):
    ctx = multiprocessing.get_context("fork")
    writers = [ctx.Process(target=_writer, args=(str(tmp_path), s, 150)) for s in ("one", "two")]
    for w in writers:
        w.start()
    cache = TuningCache(tmp_path)
    key = cache_key(kernel_of(GEMM), "arch", {"M": 16})
    seen = set()
    while any(w.is_alive() for w in writers):
        loaded = cache.load(key)
        assert not loaded.warnings, loaded.warnings  # a reader never sees half an entry
        if loaded.entry is not None:
            seen.add(loaded.entry["nests"][0]["source"])
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert cache.load(key).entry["nests"][0]["source"] in {"one", "two"}
    assert seen <= {"one", "two"}
    assert not list(cache.root.glob("*.tmp"))


def _forged(cache: TuningCache, key, mapping: dict) -> None:
    """An entry with a valid checksum whose mapping the re-checks must refuse."""
    entry = {"kernel": "seidel", "k": 2, "params": {}, "tuning": [],
             "nests": [{"nest": 0, "source": "forged", "mapping": mapping, "measured_s": 1e-9}]}
    cache.store(key, entry)


def test_a_forged_entry_is_rechecked_not_trusted(tmp_path):
    kernel = kernel_of(SEIDEL)
    arch = load_architecture("host")
    cache = TuningCache(tmp_path)
    sizes = {"T": 4, "N": 16}
    key = cache_key(kernel, "arch", sizes)
    illegal = {"kernel": "seidel", "nest": 0, "levels": [{"level": lv.name, "order": ["i", "t", "j"]}
                                                         for lv in arch.levels]}
    _forged(cache, key, illegal)
    found = recall(cache, key, kernel, arch, sizes, verify=False)
    assert found.status == "miss" and "illegal" in found.warnings[0]
    whole = {"kernel": "seidel", "nest": 0, "levels": [{"level": lv.name, "order": ["t", "i", "j"]}
                                                       for lv in arch.levels]}  # every level holds all of A
    big = {"T": 4, "N": 2048}
    key_big = cache_key(kernel, "arch", big)
    _forged(cache, key_big, whole)
    found = recall(cache, key_big, kernel, arch, big, verify=False)
    assert found.status == "miss" and "does not fit" in found.warnings[0]
    _forged(cache, key, {"kernel": "seidel", "nest": 0, "levels": [{"level": "NOPE"}]})
    found = recall(cache, key, kernel, arch, sizes, verify=False)
    assert found.status == "miss" and found.warnings


def test_compile_reports_the_cache_in_its_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    src = tmp_path / "gemm.loop"
    src.write_text(GEMM)
    kernel = kernel_of(GEMM)
    arch = load_architecture("host")
    sizes = {"M": 16, "N": 16, "K": 16}

    def run(*extra) -> dict:
        assert main(["compile", str(src), "-o", str(tmp_path / "out"), "--json", "--target", "c", *extra]) == 0
        return json.loads(capsys.readouterr().out)["kernels"][0]

    assert run("--no-cache")["cache"] == "off"
    missed = run()
    assert missed["cache"] == "miss" and missed["verification"]["edges"] == "every"
    # remember a tuned choice (fake timer: the second candidate wins), as compile --tune would
    choice = choose(kernel, arch, sizes, options=ChoiceOptions(search_top=2))
    calls = []

    def timer(job):
        from polymap.codegen.timing import Measurement

        calls.append(job.source)
        fast = len(calls) >= 2 and job.source == calls[1]  # the second candidate, in the confirmation too
        return Measurement(1e-6 if fast else 1.0, (1e-6 if fast else 1.0,))

    tuned: TunedChoice = tune_choice(choice, arch=arch, params=sizes, options=TuneOptions(k=2), timer=timer)
    from polymap.passes.search.remember import remember

    remember(TuningCache(tmp_path / "xdg" / "polymap"), cache_key(kernel, arch_fingerprint("host"), sizes),
             tuned, sizes)
    doc = run("-D", "M=12")
    assert doc["cache"] == "hit"
    assert doc["choice"]["nests"][0]["chosen"] == f"cache ({calls[1]})"
    # a remembered mapping is verified at partial tiles after full ones, not at every edge (docs/design.md)
    assert doc["verification"]["passed"] and doc["verification"]["edges"] == "partial"
    assert run("-D", "M=12", "--no-cache")["cache"] == "off"


def test_the_exact_form_reads_back_to_the_measured_mapping():
    """A mapping built in code (a loop left whole under a tiled parent) round-trips exactly, which the
    mapping-file form cannot promise (it inherits the parent's tile there)."""
    from polymap.driver import param_values
    from polymap.passes.search.register_mapping import register_mapping
    from polymap.passes.search.remember import exact_form, from_exact_form
    from polymap.poly import build_model

    kernel = kernel_of(GEMM)
    arch = load_architecture("host")
    made = register_mapping(build_model(kernel), 0, arch, param_values(kernel, {"M": 256, "N": 256, "K": 256}))
    data = json.loads(json.dumps(exact_form(made)))
    assert from_exact_form(data, kernel, arch) == made
    bad = json.loads(json.dumps(data))
    bad["loops"] = ["i", "j", "x"]
    with pytest.raises(ValueError):
        from_exact_form(bad, kernel, arch)
    bad = json.loads(json.dumps(data))
    bad["levels"][1]["keep"] = ["Z"]
    with pytest.raises(ValueError):
        from_exact_form(bad, kernel, arch)
    bad = json.loads(json.dumps(data))
    bad["levels"][2]["tile"] = [0, 1, 1]
    with pytest.raises(ValueError):
        from_exact_form(bad, kernel, arch)


def test_a_remembered_schedule_beyond_the_counting_budget_is_rechecked_as_it_was_chosen(tmp_path, monkeypatch):
    """A skewed, wavefront mapping whose exact counts are beyond the budget was checked (fits) and ranked
    at reduced sizes when compile chose it; a hit re-checks it by that rule, at the reduced sizes of its
    own sizes, and reports no counts it did not compute. Counted at the given sizes instead, jacobi-2d's
    8 x 64 x 64 wavefront tiles overflowed L1 at every size of their bucket: never a hit."""
    from polymap.passes.search import isl_schedule

    monkeypatch.setattr(isl_schedule, "ENUMERATION_LIMIT", 200)
    monkeypatch.setattr(isl_schedule, "RANKING_LIMIT", 120)
    root = Path(__file__).resolve().parent.parent
    kernel = parse((root / "examples/polybench/jacobi-1d.loop").read_text(), "jacobi-1d.loop").kernels[0]
    arch = load_architecture("host")
    sizes, other = {"TSTEPS": 6, "N": 40}, {"TSTEPS": 5, "N": 33}  # one bucket: 8 x 64
    choice = choose(kernel, arch, sizes, options=ChoiceOptions(search_evaluations=0))
    isl = next(c for c in choice.nests[0].candidates if c.source.startswith("isl schedule") and c.legal)
    assert isl.report is None  # ranked at reduced sizes when chosen
    cache = TuningCache(tmp_path)
    key = cache_key(kernel, "arch", other)
    assert key == cache_key(kernel, "arch", sizes)
    cache.store(key, {"kernel": kernel.name, "k": 2, "params": sizes, "tuning": [],
                      "nests": [{"nest": 0, "source": isl.source, "mapping": isl.mapping.to_dict(),
                                 "measured_s": 1e-3}]})
    found = recall(cache, key, kernel, arch, other, k=2, verify=False)
    assert found.status == "hit", found.warnings
    (nest,) = found.choice.nests
    assert nest.chosen.report is None
    assert dict(nest.chosen.ranked_at) == isl_schedule.reduced_sizes(found.choice.model, 0, other)


def test_a_remembered_blocking_is_made_again_for_the_sizes_of_its_bucket(tmp_path):
    """gemm's register tiles blocked for NI = 40 cut NI = 60 (the same bucket, 64) into more row chunks than
    cores: refused as they are, they are made again by their rule at 60 (re-checked: legal, fits,
    verifies) and the hit says so. A mapping no rule makes (the search's) stays a miss there. (syrk's
    were the example until its triangle took row blocks dealt on demand, which fit every size.)"""
    from polymap.passes.counting.fit import fit_problems
    from polymap.passes.search.choice import kernel_to_map, reblocked
    from polymap.poly import build_model

    root = Path(__file__).resolve().parent.parent
    kernel = parse((root / "examples/polybench/gemm.loop").read_text(), "gemm.loop").kernels[0]
    arch = load_architecture("host")
    sizes, other = {"NI": 40, "NJ": 20, "NK": 20}, {"NI": 60, "NJ": 20, "NK": 20}
    mapped, _ = kernel_to_map(kernel)
    model = build_model(mapped)
    blocked = reblocked(model, 0, "register tiles", arch, sizes)
    assert blocked is not None and not fit_problems(model, blocked, arch, sizes)
    assert fit_problems(model, blocked, arch, other), "the premise: blocked for 40, it does not fit at 60"
    key = cache_key(kernel, "arch", other)
    assert key == cache_key(kernel, "arch", sizes)

    def stored(source: str) -> None:
        TuningCache(tmp_path).store(key, {"kernel": kernel.name, "k": 2, "params": sizes, "tuning": [],
                                          "nests": [{"nest": 0, "source": source, "mapping": blocked.to_dict(),
                                                     "measured_s": 1e-3}]})

    stored("register tiles")
    found = recall(TuningCache(tmp_path), key, kernel, arch, other, k=2, verify=True)
    assert found.status == "hit", found.warnings
    (nest,) = found.choice.nests
    assert nest.chosen.source == "cache (register tiles, re-blocked for these sizes)"
    assert nest.chosen.mapping == reblocked(model, 0, "register tiles", arch, other) != blocked
    assert not fit_problems(model, nest.chosen.mapping, arch, other)
    stored("search #1")
    missed = recall(TuningCache(tmp_path), key, kernel, arch, other, k=2, verify=False)
    assert missed.status == "miss" and "does not fit at these sizes" in missed.warnings[0]
