"""``polymap compile`` in-process: files written, verification, refusals."""
from __future__ import annotations

import json
import os
from pathlib import Path

from polymap.cli import main

EXAMPLES = Path(__file__).parent.parent / "examples"
os.environ.setdefault("OMP_NUM_THREADS", "2")


def test_compile_gemm_default_mapping(tmp_path, capsys):
    rc = main(["compile", str(EXAMPLES / "gemm.loop"), "-o", str(tmp_path), "-D", "M=19", "-D", "N=17",
               "-D", "K=13", "--target", "c"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "largest absolute difference" in out and "of the largest magnitude in the reference C" in out
    src = (tmp_path / "gemm.c").read_text()
    assert "void gemm(float *restrict A, float *restrict B, float *restrict C, long M, long N, long K)" in src
    doc = json.loads((tmp_path / "gemm.json").read_text())
    assert doc["kernel"] == "gemm" and doc["mappings"][0]["nest"] == 0


def test_compile_json_and_no_verify(tmp_path, capsys):
    rc = main(["compile", str(EXAMPLES / "lu.loop"), "-o", str(tmp_path), "-D", "N=9", "--no-verify",
               "--json", "--target", "c"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kernels"][0]["kernel"] == "lu" and "verification" not in doc["kernels"][0]
    assert (tmp_path / "lu.c").exists()


def test_illegal_mapping_is_refused(tmp_path, capsys):
    mapping = tmp_path / "m.yaml"
    mapping.write_text("levels:\n  - level: DRAM\n    order: [k, i, j]\n"
                       "  - level: GLB\n    tile: {i: 7, j: 5}\n    order: [k, i, j]\n"
                       "  - level: RF\n    tile: {i: 1, j: 1, k: 1}\n")
    rc = main(["compile", str(EXAMPLES / "lu.loop"), "--arch", "toy", "--mapping", str(mapping),
               "-o", str(tmp_path), "-D", "N=19", "--target", "c"])
    assert rc == 1
    assert "illegal" in capsys.readouterr().out


def test_bad_target_is_bad_input(tmp_path):
    assert main(["compile", str(EXAMPLES / "gemm.loop"), "-o", str(tmp_path), "--target", "fortran"]) == 2


def test_unknown_define_is_bad_input(tmp_path, capsys):
    rc = main(["compile", str(EXAMPLES / "gemm.loop"), "-o", str(tmp_path), "-D", "Q=3", "--target", "c"])
    assert rc == 2
    assert "no parameter 'Q'" in capsys.readouterr().err
    assert not (tmp_path / "gemm.c").exists()


def test_shared_loop_names_are_renamed_and_the_choice_explained(tmp_path, capsys):
    rc = main(["compile", str(EXAMPLES / "jacobi2d.loop"), "-o", str(tmp_path), "-D", "T=3", "-D", "N=12",
               "--target", "c,numpy"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "renamed apart" in captured.out and "original order" in captured.out
    assert "choosing a mapping" not in captured.err  # progress only on a terminal
    doc = json.loads((tmp_path / "jacobi2d.json").read_text())
    assert doc["choice"]["renamed"] == {"0": ["i", "j"]}
    nest = doc["choice"]["nests"][0]
    assert sum(c["chosen"] for c in nest["candidates"]) == 1
    assert "void jacobi2d(float *restrict A, float *restrict B, long T, long N)" in (tmp_path / "jacobi2d.c").read_text()


def test_choice_ranks_by_counts_and_prints_traffic(tmp_path, capsys):
    rc = main(["compile", str(EXAMPLES / "gemm.loop"), "-o", str(tmp_path), "-D", "M=64", "-D", "N=64",
               "-D", "K=64", "--target", "c", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)["kernels"][0]
    cands = [c for c in doc["choice"]["nests"][-1]["candidates"] if "cycles" in c]
    # ranked by cycles; equal cycles go to fewer strided references of the innermost walk, then energy
    # (choice.rank, docs/design.md)
    keys = [(c["cycles"], c["strided"], c["energy_pj"]) for c in cands]
    assert keys == sorted(keys) and cands[0]["chosen"]
    # the ranking had something to order: counted candidates of different cycles, or candidates left
    # uncounted because their compute term alone lost to the chosen one's cycles (choice.compute_bound)
    lost = [c for c in doc["choice"]["nests"][-1]["candidates"] if "cycles" not in c and c["legal"] is None]
    assert len(set(k[0] for k in keys)) > 1 or lost
