"""One pipeline: the command line and the API give the same answers, and what compile writes the rest reads.

- every command's ``--json`` equals the API function's result rendered by the same report, on every example;
- compile's ``NAME.json`` goes back through ``cost``, ``check`` and ``compile --mapping`` with the same counts,
  which are checked against the step-by-step simulator on one example;
- the choice is deterministic (work budgets), and a wall-clock stop is reported;
- the CLI's surface: ``--version``, help with defaults, JSON errors, the exit-3 handler.
"""
from __future__ import annotations

import copy
import dataclasses

import json
import os
from pathlib import Path

import numpy as np
import pytest

import polymap
from polymap import api
from polymap.cli import main
from polymap.reports.check import verdict_json
from polymap.commands.compile import document
from polymap.commands.run import _document as run_document
from polymap.passes.counting.cost_model import Objective, rank_key
from polymap.passes.search.choice import ChoiceOptions, choose
from polymap.reports.cost import cost_nests_json
from polymap.reports.deps import deps_json
from polymap.reports.model import kernel_json
from test_examples import SMALL

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p for p in SMALL if not p.startswith("examples/polybench/"))
FAST = ChoiceOptions(search_evaluations=0)  # the search has its own tests; here it only costs time
FAST_FLAGS = ["--search-evaluations", "0"]
os.environ.setdefault("OMP_NUM_THREADS", "2")


def _defines(params: dict[str, int]) -> list[str]:
    return [x for k, v in params.items() for x in ("-D", f"{k}={v}")]


def _cli_json(capsys: pytest.CaptureFixture, *argv: str, status: int = 0) -> dict:
    rc = main([*map(str, argv), "--json"])
    captured = capsys.readouterr()
    assert rc == status, captured.err
    return json.loads(captured.out)


def _kernel(path: str) -> tuple[polymap.ir.Kernel, dict[str, int]]:
    kernel = polymap.load(ROOT / path).kernels[0]
    return kernel, polymap.param_values(kernel, SMALL[path])


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    """compile --no-verify of every example (CLI), its directory and NAME.json."""
    out = {}
    for path in EXAMPLES:
        kernel, params = _kernel(path)
        d = tmp_path_factory.mktemp(kernel.name)
        assert main(["compile", str(ROOT / path), "-o", str(d), "--no-verify", "--target", "c", "--arch", "toy",
                     *FAST_FLAGS, *_defines(SMALL[path])]) == 0
        out[path] = (d, json.loads((d / f"{kernel.name}.json").read_text()))
    return out


# --------------------------------------------------------------------------- CLI == API


@pytest.mark.parametrize("path", EXAMPLES)
def test_show_deps_check_json_equal_the_api(path: str, capsys: pytest.CaptureFixture):
    kernel, params = _kernel(path)
    file = ROOT / path
    assert _cli_json(capsys, "show", file, *_defines(SMALL[path])) == json.loads(json.dumps(
        {"kernels": [kernel_json(api.model(kernel), params)]}))
    for memory in (False, True):
        flags = ["--memory-based"] if memory else []
        want = deps_json(api.dependences(kernel, memory_based=memory))
        assert _cli_json(capsys, "deps", file, *flags) == json.loads(json.dumps(want))
    loops = polymap.mapping.model.nest_loops(kernel, 0)
    order = tuple(reversed(loops))
    verdict = api.check(kernel, order=order, params=params)
    got = _cli_json(capsys, "check", file, "--order", ",".join(order), *_defines(SMALL[path]),
                    status=0 if verdict.legal else 1)
    assert got == json.loads(json.dumps(verdict_json(kernel.name, verdict)))


def _timeless(doc: dict) -> dict:
    """``doc`` with each nest's scheduler time (wall seconds: no two runs agree) checked to be a
    time and set aside; everything else two compiles write must be equal."""
    doc = copy.deepcopy(doc)
    for nest in (doc.get("choice") or {}).get("nests", []):
        seconds = nest.pop("scheduler_seconds")
        assert seconds is None or (isinstance(seconds, float) and seconds >= 0)
    return doc


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES)
def test_compile_cost_transform_run_json_equal_the_api(path: str, capsys: pytest.CaptureFixture,
                                                       tmp_path: Path, compiled: dict):
    kernel, params = _kernel(path)
    file = ROOT / path
    d, doc = compiled[path]
    # compile: the API writes the same NAME.json and returns the same document
    result = api.compile(kernel, arch="toy", params=params, out_dir=d,
                         options=api.CompileOptions(targets=("c",), verify=False, choice=FAST),
                         extra={k: doc[k] for k in ("cache", "tuning")})  # the command line's additions
    assert _timeless(json.loads(json.dumps(document(result)))) == _timeless(
        {**doc, "files": [str(d / f"{kernel.name}{s}") for s in (".c", ".py", ".json")]})
    assert _timeless(json.loads((d / f"{kernel.name}.json").read_text())) == _timeless(doc)  # the API's, rewritten
    name_json = d / f"{kernel.name}.json"
    if doc["mappings"]:  # else every nest keeps its original schedule: nothing to cost
        mappings = api.mappings_of(kernel, name_json, "toy")
        reports = api.cost_nests(kernel, name_json, arch="toy", params=params)
        spreads = [api.cycle_spread(kernel, m, r, arch="toy", params=params) for m, r in zip(mappings, reports)]
        want = cost_nests_json(reports, api.architecture("toy"), spreads)
        assert _cli_json(capsys, "cost", file, "--arch", "toy", "--mapping", name_json,
                         *_defines(SMALL[path])) == json.loads(json.dumps(want))
    # transform and run over the first mapping, in its own file
    if doc["mappings"]:
        one = tmp_path / "one.json"
        one.write_text(json.dumps(doc["mappings"][0]))
        source = api.transform(kernel, one, arch="toy", params=params)
        assert _cli_json(capsys, "transform", file, "--arch", "toy", "--mapping", one,
                         *_defines(SMALL[path])) == {"kernel": kernel.name, "source": source}
    rng = np.random.default_rng(1)
    arrays = {d_.name: rng.random(tuple(polymap.evaluate.eval_int(s, params) for s in d_.shape))
              .astype(polymap.tensors.numpy_dtype(d_.dtype))
              for d_ in kernel.decls if d_.role in ("in", "inout")}
    np.savez(tmp_path / "in.npz", **arrays)
    outputs = api.run(kernel, arrays, params=params, target="numpy", arch="toy", choice=FAST)
    got = _cli_json(capsys, "run", file, "--inputs", tmp_path / "in.npz", "--target", "numpy", "--arch", "toy",
                    *FAST_FLAGS, *_defines(SMALL[path]))
    assert got == json.loads(json.dumps(run_document(kernel, "numpy", outputs, None)))


# --------------------------------------------------------------------------- NAME.json round trip


def _counts(cost_doc: dict) -> dict:
    """The counts of one cost document (what must not change on the way back)."""
    return {"instances": cost_doc["instances"], "levels": cost_doc["levels"],
            "energy_pj": cost_doc["energy_pj"], "cycles": cost_doc["cycles"]}


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES)
def test_name_json_round_trips_through_cost_check_and_compile(path: str, capsys: pytest.CaptureFixture,
                                                             tmp_path: Path, compiled: dict):
    kernel, params = _kernel(path)
    file = ROOT / path
    d, doc = compiled[path]
    name_json = d / f"{kernel.name}.json"
    assert len(doc["cost"]) == len(doc["mappings"])
    for entry in doc["cost"]:
        assert {"kernel", "params", "instances", "levels", "energy_pj", "cycles", "intensity"} <= set(entry)
    if doc["mappings"]:
        got = _cli_json(capsys, "cost", file, "--arch", "toy", "--mapping", name_json, *_defines(SMALL[path]))
        nests = [got] if len(doc["mappings"]) == 1 else got["nests"]
        assert [_counts(c) for c in nests] == [_counts(c) for c in doc["cost"]]
        verdict = _cli_json(capsys, "check", file, "--mapping", name_json, *_defines(SMALL[path]))
        assert verdict["legal"] is True
    again = tmp_path / "again"
    got = _cli_json(capsys, "compile", file, "--arch", "toy", "--mapping", name_json, "-o", again, "--target", "c",
                    *_defines(SMALL[path]))["kernels"][0]
    assert got["mappings"] == doc["mappings"]
    assert [_counts(c) for c in got["cost"]] == [_counts(c) for c in doc["cost"]]
    assert got["verification"]["passed"] is True


def test_name_json_counts_equal_the_simulator(tmp_path: Path):
    """The cost documents compile writes are the exact counts: checked by step-by-step simulation."""
    from simulator import simulate

    kernel = polymap.parse((ROOT / "examples" / "gemm.loop").read_text(), "gemm.loop").kernels[0]
    params = {"M": 5, "N": 6, "K": 7}
    result = api.compile(kernel, arch="toy", params=params, out_dir=tmp_path,
                         options=api.CompileOptions(targets=("c",), verify=False, choice=FAST))
    doc = json.loads((tmp_path / "gemm.json").read_text())
    assert result.mappings
    for mapping, entry in zip(result.mappings, doc["cost"]):
        sim = simulate(kernel, mapping, params)
        assert entry["instances"] == sim["instances"]
        for level, want in zip(entry["levels"], sim["levels"]):
            assert set(level["tensors"]) == set(want["tensors"])
            for tensor, counts in level["tensors"].items():
                assert counts == want["tensors"][tensor], (level["name"], tensor)


def test_compile_reuses_the_choice_counts_only_where_they_were_made(tmp_path: Path):
    """compile writes the winner's report from the choice instead of counting it again: the same exact
    counts as a fresh count; a choice counted at other sizes or for another architecture is not reused."""
    kernel, params = _kernel("examples/2mm.loop")
    toy = api.architecture("toy")
    chosen = choose(kernel, toy, params, options=FAST)
    assert chosen.mappings
    for mp in chosen.mappings:
        fresh = api._report(chosen.model, mp, toy, params, api.CostOptions())
        assert chosen.report_of(mp, toy, params) == fresh
        other = {k: v + 1 for k, v in params.items()}
        assert chosen.report_of(mp, toy, other) is None
        assert chosen.report_of(mp, api.architecture("host"), params) is None
    result = api.compile(kernel, arch="toy", params=params, choice=chosen,
                         options=api.CompileOptions(verify=False, choice=FAST))
    assert result.costs == tuple(api._report(chosen.model, mp, toy, params, api.CostOptions())
                                 for mp in result.mappings)


@pytest.mark.parametrize("path", ["examples/gemm.loop", "examples/2mm.loop"])
def test_the_search_winners_are_counted_once_with_the_exact_counts(path: str, budget_runs: list[str],
                                                                    monkeypatch: pytest.MonkeyPatch):
    """The search checks and counts its winners; the choice ranks them with those reports instead of
    counting them again in a child of their own (gemm: the fast path's counts; 2mm: the ISL path's),
    and those reports equal a fresh legality check and count of the same mapping."""
    from polymap.passes.search import choice as choice_module

    kernel, params = _kernel(path)
    toy = api.architecture("toy")
    pieces = budget_runs
    chosen = choose(kernel, toy, params, options=ChoiceOptions(search_evaluations=40, search_top=2, search_isl_counts=6))
    monkeypatch.undo()
    searched = [c for n in chosen.nests for c in n.candidates if c.source.startswith("search #")]
    assert searched, "the search found no candidate: the test checks nothing"
    assert not [w for w in pieces if "'search #" in w]
    assert [w for w in pieces if w.startswith("the search of nest")]
    for cand in searched:
        fresh = choice_module._evaluate(chosen.model, cand.source, cand.mapping, cand.mapping, toy, params)
        assert cand.legal and fresh.legal
        assert cand.report == fresh.report


# --------------------------------------------------------------------------- one decision in one place


def test_compile_api_and_cli_make_the_same_choice_as_run(tmp_path: Path):
    """polymap.compile, polymap compile and run --target c without a mapping: the same mappings."""
    kernel, params = _kernel("examples/gemm.loop")
    chosen = choose(kernel, api.architecture("toy"), params, options=FAST)
    result = api.compile(kernel, arch="toy", params=params, options=api.CompileOptions(verify=False, choice=FAST))
    assert result.mappings == chosen.mappings and result.mappings
    assert main(["compile", str(ROOT / "examples/gemm.loop"), "--arch", "toy", "-o", str(tmp_path), "--no-verify",
                 *FAST_FLAGS, *_defines(params)]) == 0
    doc = json.loads((tmp_path / "gemm.json").read_text())
    assert doc["mappings"] == [m.to_dict() for m in chosen.mappings]


def test_choice_is_deterministic_and_reports_wall_clock_stops():
    kernel, params = _kernel("examples/2mm.loop")
    arch = api.architecture("toy")
    first = choose(kernel, arch, params, options=FAST)
    again = choose(kernel, arch, params, options=FAST)
    assert [n.chosen.mapping for n in first.nests] == [n.chosen.mapping for n in again.nests]
    assert all(not n.stopped for n in first.nests)
    stopped = choose(kernel, arch, params, options=ChoiceOptions(search_evaluations=40,
                                                                 candidate_limit_seconds=0.0,
                                                                 search_limit_seconds=0.0))
    assert all(n.stopped for n in stopped.nests)
    assert all(n.chosen.source == "original order" for n in stopped.nests)
    assert "safety limit" in stopped.nests[0].stopped[0]


def test_objectives_rank_by_their_definition():
    """cycles, energy and EDP as mapping.md defines them, over numbers and arrays alike."""
    assert rank_key(Objective.CYCLES, 10.0, 3.0) == (3.0, 10.0)
    assert rank_key(Objective.ENERGY, 10.0, 3.0) == (10.0, 3.0)
    assert rank_key(Objective.EDP, 10.0, 3.0) == (30.0, 3.0)
    from polymap.passes.counting.cost_model import compute_cycles, level_cycles, level_energy

    toy = api.architecture("toy")
    dram, glb = toy.levels[0], toy.levels[1]
    arr = np.array([3, 5])
    np.testing.assert_array_equal(level_energy(dram, arr, arr + 1), [3 * 200 + 4 * 200, 5 * 200 + 6 * 200])
    assert level_energy(glb, 3, 4) == 3 * 6 + 4 * 6
    np.testing.assert_array_equal(compute_cycles(toy, 64, np.array([1, 4, 99])), [64, 16, 4])  # 16 units at most
    assert level_cycles(glb, 64) == 2 and level_cycles(toy.levels[2], 64) is None


def test_search_ranks_by_the_objective_asked():
    kernel, params = _kernel("examples/gemm.loop")
    for objective in Objective:
        found = api.search_ranked(kernel, arch="toy", params=params,
                                  options=api.NestSearchOptions(objective=objective, top=4, evaluations=60))
        keys = [objective.key(r) for _, r in found]
        assert found and keys == sorted(keys)


# --------------------------------------------------------------------------- the command line


def test_version_and_help_with_defaults(capsys: pytest.CaptureFixture):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"polymap {polymap.__version__}"
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "exit status" in text and "The ``polymap`` command" not in text
    assert main(["compile", "--help"]) == 0
    text = capsys.readouterr().out
    assert "(default: out)" in text and "(default: host, this machine)" in text and "(default: c,numpy)" in text


def test_json_errors_are_documents_with_a_location(tmp_path: Path, capsys: pytest.CaptureFixture):
    bad = tmp_path / "bad.loop"
    bad.write_text("kernel k(N = 4) {\n  in A[N]\n  for i in 0..N { A[i] = 0 }\n}\n")
    assert main(["show", str(bad), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"]["file"] == str(bad) and (doc["error"]["line"], doc["error"]["column"]) == (3, 19)
    assert "A" in doc["error"]["message"]
    assert main(["compile", str(ROOT / "examples" / "gemm.loop"), "--target", "fortran", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["line"] is None
    assert main(["show", "--json", "--no-such-flag", str(bad)]) == 2
    assert "no-such-flag" in json.loads(capsys.readouterr().out)["error"]["message"]


def test_internal_errors_exit_3_with_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    import polymap.commands.show as show

    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(show, "main", broken)
    file = str(ROOT / "examples" / "gemm.loop")
    assert main(["show", file]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ZeroDivisionError: a bug" in err and "report" in err
    assert "Traceback" not in err
    assert main(["show", file, "--debug"]) == 3
    assert "Traceback" in capsys.readouterr().err
    assert main(["show", file, "--json"]) == 3
    assert "ZeroDivisionError" in json.loads(capsys.readouterr().out)["error"]["message"]


@pytest.mark.parametrize("name, command", [("missing.loop", "show"), ("missing.c", "show"),
                                            ("missing.yaml", "arch")])
def test_json_error_of_an_unreadable_file_names_it(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                   name: str, command: str):
    missing = tmp_path / name
    assert main([command, str(missing), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)["error"]
    assert doc["file"] == str(missing) and doc["line"] is None
    assert "cannot read file" in doc["message"]


@pytest.mark.parametrize("path", ["examples/polybench/symm.loop", "examples/polybench/gramschmidt.loop"])
def test_a_candidate_is_rejected_exactly_when_check_finds_a_violation(path: str):
    """compile asks the legality of its candidates without witnesses (symm's register tiles at LARGE:
    their witnesses took over 300 s); the verdict must still be check's, candidate by candidate."""
    from polymap.passes.legality.legality import check_mapping
    from polymap.passes.search.choice import ILLEGAL_CANDIDATE

    kernel, params = _kernel(path)
    # every candidate checked, also those whose compute term alone loses (ChoiceOptions.count_losers)
    chosen = choose(kernel, api.architecture("host"), params, options=dataclasses.replace(FAST, count_losers=True))
    cands = [c for n in chosen.nests for c in n.candidates if c.mapping is not None]
    illegal = [c for c in cands if c.problems == (ILLEGAL_CANDIDATE,)]
    assert illegal, "no illegal candidate: the test checks nothing"
    for cand in cands:
        verdict = check_mapping(chosen.model, cand.mapping, params=params)
        assert (cand in illegal) == (not verdict.legal), cand.source
        assert verdict.legal or verdict.violations, cand.source
