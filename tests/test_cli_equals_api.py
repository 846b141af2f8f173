"""The command line and the API give the same JSON for the commands ``test_orchestration.py`` leaves out:
``search``, ``report``, ``arch``, ``calibrate`` and ``import timeloop``, and ``show``/``deps``/``check`` on
every PolyBench kernel and on the networks.

Each command's ``--json`` output is compared with the API function's result rendered by the same report;
the only field left out is a measured wall time (``search``'s ``seconds``). ``calibrate`` runs on a
deterministic probe and timer (a machine that streams one element per ns), so both sides measure the
same thing; the calibration set is cut to two kernels to stay fast.
"""
from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import pytest

import polymap
from polymap import api
from polymap.cli import build_parser, main
from polymap.codegen.timing import Measurement, TimingJob
from polymap.commands.calibrate import _document as calibrate_document
from polymap.reports.check import verdict_json
from polymap.machine.calibration_set import KERNELS
from polymap.mapping.model import nest_loops
from polymap.passes.counting.cost_model import Objective
from polymap.passes.search.choice import ChoiceOptions
from polymap.passes.search.mapsearch import SearchOptions
from polymap.reports.deps import deps_json
from polymap.reports.html.facts import ReportOptions
from polymap.reports.model import kernel_json
from polymap.reports.search import search_json
from test_calibrate import FakeProbe
from test_examples import SMALL
from test_networks import _small as small_network_sizes

ROOT = Path(__file__).resolve().parents[1]
POLYBENCH = sorted(p for p in SMALL if p.startswith("examples/polybench/"))
NETWORKS = sorted((ROOT / "examples" / "networks").glob("*.loop"))
TIMELOOP = Path(__file__).parent / "timeloop"


def _defines(params: dict[str, int]) -> list[str]:
    return [x for k, v in params.items() for x in ("-D", f"{k}={v}")]


def _cli_json(capsys: pytest.CaptureFixture, *argv: str | Path, status: int = 0) -> dict | list:
    rc = main([*map(str, argv), "--json"])
    captured = capsys.readouterr()
    assert rc == status, captured.err
    return json.loads(captured.out)


def _same(doc: object) -> object:
    """``doc`` as it comes back from JSON (tuples become lists, keys strings)."""
    return json.loads(json.dumps(doc))


# --------------------------------------------------------------------------- every PolyBench kernel


@pytest.mark.parametrize("path", POLYBENCH)
def test_polybench_show_deps_check_equal_the_api(path: str, capsys: pytest.CaptureFixture):
    kernel = polymap.load(ROOT / path).kernels[0]
    params = polymap.param_values(kernel, SMALL[path])
    file = ROOT / path
    assert _cli_json(capsys, "show", file, *_defines(SMALL[path])) == _same(
        {"kernels": [kernel_json(api.model(kernel), params)]})
    assert _cli_json(capsys, "deps", file) == _same(deps_json(api.dependences(kernel)))
    order = tuple(reversed(nest_loops(kernel, 0)))
    verdict = api.check(kernel, order=order, params=params)
    got = _cli_json(capsys, "check", file, "--order", ",".join(order), *_defines(SMALL[path]),
                    status=0 if verdict.legal else 1)
    assert got == _same(verdict_json(kernel.name, verdict))


@pytest.mark.parametrize("path", NETWORKS, ids=lambda p: p.name)
def test_networks_show_and_deps_equal_the_api(path: Path, capsys: pytest.CaptureFixture):
    program = polymap.load(path)
    assert _cli_json(capsys, "show", path) == _same(
        {"kernels": [kernel_json(api.model(k), polymap.param_values(k, {})) for k in program.kernels]})
    assert _cli_json(capsys, "deps", path) == _same({"kernels": [deps_json(api.dependences(k))
                                                                 for k in program.kernels]})


# --------------------------------------------------------------------------- search


def _without_seconds(doc: list[dict]) -> list[dict]:
    for entry in doc:
        entry.get("search", {}).pop("seconds", None)  # a measured wall time: the one thing allowed to differ
    return doc


@pytest.mark.parametrize("objective", ["energy", "edp"])
def test_search_equals_the_api(objective: str, capsys: pytest.CaptureFixture):
    file = ROOT / "examples" / "gemm.loop"
    sizes = {"M": 8, "N": 12, "K": 6}
    kernels = polymap.load(file).kernels
    found = api.search_network(kernels, arch="toy", params=sizes, workers=1,
                               options=SearchOptions(objective=Objective.parse(objective), top=3,
                                                     max_evaluations=300))
    want = search_json(found.network, api.architecture("toy"))
    got = _cli_json(capsys, "search", file, "--arch", "toy", "--top", "3", "--evaluations", "300", "--workers", "1",
                    "--objective", objective, *_defines(sizes))
    assert got and _without_seconds(got) == _without_seconds(_same(want))
    assert all(e["search"]["objective"] == objective for e in got if "search" in e)


# --------------------------------------------------------------------------- report


@pytest.mark.parametrize("mapped", [True, False])
def test_report_page_equals_the_api(mapped: bool, tmp_path: Path, capsys: pytest.CaptureFixture):
    file = ROOT / "examples" / "gemm.loop"
    sizes = {"M": 16, "N": 16, "K": 8}
    kernels = polymap.load(file).kernels
    mapping = ROOT / "examples" / "gemm_toy.yaml" if mapped else None
    page = api.report(kernels, arch="toy", mapping=mapping, params=sizes, title=f"polymap report: {file}",
                      options=ReportOptions(loops=("i", "k")), choice=ChoiceOptions(search_evaluations=0))
    out = tmp_path / "r.html"
    flags = ["--mapping", mapping] if mapped else ["--search-evaluations", "0"]
    doc = _cli_json(capsys, "report", file, "--arch", "toy", *flags, "--loops", "i,k", *_defines(sizes), "-o", out)
    assert doc == {"report": str(out), "kernels": ["gemm"]}
    assert out.read_text() == page


# --------------------------------------------------------------------------- arch


@pytest.mark.parametrize("name", ["toy", "eyeriss", "host"])
def test_arch_equals_the_api(name: str, capsys: pytest.CaptureFixture):
    assert _cli_json(capsys, "arch", name) == _same(api.architecture(name).to_dict())


def test_arch_list_equals_the_api(capsys: pytest.CaptureFixture):
    doc = _cli_json(capsys, "arch", "--list")
    assert [p["name"] for p in doc["presets"]] == list(api.architecture_presets())
    assert all(p["description"] for p in doc["presets"])


# --------------------------------------------------------------------------- calibrate


class FakeTimer:
    """Seconds that depend only on what is timed: the label's length, so every kernel differs."""

    def __init__(self, environment: object = None) -> None:
        self.jobs: list[str] = []

    def __call__(self, job: TimingJob) -> Measurement:
        self.jobs.append(job.source)
        seconds = 1e-6 * (len(job.source) + len(job.c_source) % 97)
        return Measurement(seconds, (seconds, seconds * 1.01, seconds * 1.02))


def test_calibrate_equals_the_api(tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch):
    # the calibration set, cut to two kernels whose choices are quick (gemm 0.2 s, conv2d 0.4 s of CPU;
    # jacobi2d's isl candidates, ranked at reduced sizes, took 8.5 s): the command only wraps api.calibrate
    few = {name: KERNELS[name] for name in ("gemm", "conv2d")}
    monkeypatch.setattr(api, "KERNELS", few)
    monkeypatch.setattr(api, "NativeProbe", lambda vector_bytes: FakeProbe())
    monkeypatch.setattr("polymap.commands.calibrate.ProcessTimer", FakeTimer)
    monkeypatch.setattr(os, "environ", dict(os.environ))  # the command sets the timing environment
    timer = FakeTimer()
    want = calibrate_document(api.calibrate(arch="toy", probe=FakeProbe(), timer=timer), tmp_path / "a.yaml")
    assert {label.split()[0] for label in timer.jobs} <= set(few) and len(want["samples"]) >= 2
    got = _cli_json(capsys, "calibrate", "--arch", "toy", "-o", tmp_path / "a.yaml")
    assert got == _same(want)
    assert api.architecture(tmp_path / "a.yaml").name == "toy-calibrated"


# --------------------------------------------------------------------------- import timeloop


@pytest.mark.parametrize("problem, arch, mapping", [("conv1d", "two_level", None),
                                                    ("conv1d", "two_level", "conv1d_ws"),
                                                    ("conv1d_oc", "three_level", "conv1d_oc_bypass"),
                                                    ("conv1d", "spatial", "conv1d_r_spatial")])
def test_import_timeloop_equals_the_api(problem: str, arch: str, mapping: str | None, tmp_path: Path,
                                        capsys: pytest.CaptureFixture):
    files = [TIMELOOP / f"{problem}.problem.yaml", TIMELOOP / f"{arch}.arch.yaml"]
    if mapping is not None:
        files.append(TIMELOOP / f"{mapping}.mapping.yaml")
    result = api.import_timeloop(*files[:2], files[2] if mapping else None, tmp_path / "api")
    got = _cli_json(capsys, "import", "timeloop", *files, "-o", tmp_path / "cli")
    assert got["kernel"] == result.kernel and got["notes"] == list(result.notes)
    assert [Path(f).name for f in got["files"]] == [Path(f).name for f in result.files]
    for cli_file, api_file in zip(got["files"], result.files):  # the same files, written the same
        assert Path(cli_file).parent == tmp_path / "cli" and Path(cli_file).read_text() == Path(api_file).read_text()


# --------------------------------------------------------------------------- help


def test_every_option_has_help_that_states_its_default():
    """Each optional flag that takes a value says what happens without it (a flag that only switches
    something on, and the two alternatives of check, need not)."""
    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, parser in subcommands.choices.items():
        assert parser.description, f"polymap {name} --help has no description"
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            text = action.help or ""
            takes_value = not isinstance(action, argparse._StoreTrueAction) and not action.required
            if not text or (takes_value and "default" not in text and "this or" not in text):
                missing.append(f"{name} {'/'.join(action.option_strings)}")
    assert not missing, missing


# --------------------------------------------------------------------------- NAME.json round trip, the rest


def _network_cases() -> list[tuple[Path, str, dict[str, int]]]:
    """Every distinct kernel of the networks at small sizes (tests/test_networks.py's shrinking).

    At those sizes most of ResNet-18's layers are one kernel under different names (every 3x3
    stride-1 convolution is ``C=2, K=3, P=Q=3``): the first of each text (its name left out) and
    sizes stands for the rest, since compile, cost and check see the same nest at the same sizes::

        layer1_0_conv1, layer1_0_conv2, ..., layer4_1_conv2 (3x3, stride 1)  -> layer1_0_conv1
        conv1 (7x7, stride 2), layer2_0_conv1 (3x3, stride 2), layer2_0_downsample (1x1), fc
    """
    cases, seen = [], set()
    for path in NETWORKS:
        texts = dict(re.findall(r"^kernel (\w+)(\(.*?^\})", path.read_text(), re.M | re.S))
        for k in polymap.load(path).kernels:
            sizes = small_network_sizes(k)
            key = (texts[k.name].split("{", 1)[1], tuple(sorted(sizes.items())))
            if key not in seen:
                seen.add(key)
                cases.append((path, k.name, sizes))
    return cases


ROUND_TRIP = ([(ROOT / p, None, SMALL[p]) for p in POLYBENCH] + _network_cases())


def _counts(cost_doc: dict) -> dict:
    return {"instances": cost_doc["instances"], "levels": cost_doc["levels"],
            "energy_pj": cost_doc["energy_pj"], "cycles": cost_doc["cycles"]}


@pytest.mark.slow
@pytest.mark.parametrize("file, kernel, sizes", ROUND_TRIP,
                         ids=[f"{f.name}:{k}" if k else f.name for f, k, _ in ROUND_TRIP])
def test_name_json_round_trips_polybench_and_networks(file: Path, kernel: str | None, sizes: dict[str, int],
                                                      tmp_path: Path, capsys: pytest.CaptureFixture):
    """compile's NAME.json goes back through cost, check and compile --mapping with the same counts, and
    no written order names a loop twice (``test_orchestration.py`` does the other examples)."""
    pick = ["--kernel", kernel] if kernel else []
    flags = [*pick, *_defines(sizes)]
    first = _cli_json(capsys, "compile", file, "--arch", "toy", "-o", tmp_path / "a", "--target", "c",
                      "--no-verify", "--search-evaluations", "0", "--no-cache", *flags)["kernels"][0]
    name_json = tmp_path / "a" / f"{first['kernel']}.json"
    doc = json.loads(name_json.read_text())
    assert len(doc["cost"]) == len(doc["mappings"])
    for m in doc["mappings"]:
        for level in m["levels"]:
            order = level.get("order", [])
            assert len(order) == len(set(order)), (level, "a loop twice in one order")
    if doc["mappings"]:
        got = _cli_json(capsys, "cost", file, "--arch", "toy", "--mapping", name_json, *flags)
        nests = [got] if len(doc["mappings"]) == 1 else got["nests"]
        assert [_counts(c) for c in nests] == [_counts(c) for c in doc["cost"]]
        assert _cli_json(capsys, "check", file, "--mapping", name_json, *flags)["legal"] is True
    again = _cli_json(capsys, "compile", file, "--arch", "toy", "--mapping", name_json, "-o", tmp_path / "b",
                      "--target", "c", *flags)["kernels"][0]
    assert again["mappings"] == doc["mappings"]
    assert [_counts(c) for c in again["cost"]] == [_counts(c) for c in doc["cost"]]
    assert again["verification"]["passed"] is True
