"""polymap deps / check in-process: JSON shape, exit statuses, pictures."""
from __future__ import annotations

import json
from pathlib import Path

from bruteforce import witness_is_real
from polymap.cli import main
from polymap.driver import load_program
from polymap.passes.schedule.tiling import order_mapping

EX = Path(__file__).parent.parent / "examples"


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_deps_json_gemm(capsys):
    rc, out, _ = run(capsys, "deps", str(EX / "gemm.loop"), "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["kernel"] == "gemm" and doc["analysis"] == "value-based"
    assert doc["loops"]["k"] == {"parallel": False, "reduction": True}
    assert doc["loops"]["i"] == {"parallel": True, "reduction": False}
    kinds = {(d["kind"], d["source"], d["sink"], d["tensor"]) for d in doc["dependences"]}
    assert ("RAW", "init", "acc", "C") in kinds
    rc, out, _ = run(capsys, "deps", str(EX / "gemm.loop"), "--json", "--memory-based")
    assert json.loads(out)["analysis"] == "memory-based"


def test_deps_human_report(capsys):
    rc, out, _ = run(capsys, "deps", str(EX / "lu.loop"))
    assert rc == 0 and "distance" in out and "carried by" in out
    assert "2 loops named i" in out


def test_check_order_exit_status_and_witness(capsys, tmp_path):
    rc, out, _ = run(capsys, "check", str(EX / "gemm.loop"), "--order", "k,i,j")
    assert rc == 0 and "partial sums of C" in out
    rc, out, err = run(capsys, "check", str(EX / "gemm_scalar_acc.loop"), "--order", "k,i,j",
                       "-D", "M=3", "-D", "N=3", "-D", "K=3", "--json")
    assert rc == 1
    doc = json.loads(out)
    assert doc["legal"] is False and doc["violations"]
    kernel = load_program(EX / "gemm_scalar_acc.loop").kernels[0]
    m = order_mapping(kernel, 0, ("i", "j", "k"), ("k", "i", "j"))
    for v in doc["violations"]:
        assert witness_is_real(kernel, m, {"M": 3, "N": 3, "K": 3}, v)
    rc, out, _ = run(capsys, "check", str(EX / "seidel2d.loop"), "--order", "i,t,j")
    assert rc == 1 and "skew" in out and "runs the read first" in out


def test_check_bad_order_is_bad_input(capsys):
    rc, _, err = run(capsys, "check", str(EX / "gemm.loop"), "--order", "i,x")
    assert rc == 2 and "no loop 'x'" in err
    rc, _, err = run(capsys, "check", str(EX / "gemm.loop"), "--order", "i,i")
    assert rc == 2


def _yaml(spatial_level: str) -> str:
    glb_spatial = "    spatial: [j]\n" if spatial_level == "GLB" else ""
    rf_spatial = "    spatial: [j]\n" if spatial_level == "RF" else ""
    rf_j = 1 if spatial_level == "GLB" else 4
    return ("levels:\n  - level: DRAM\n    order: [i, j, k]\n  - level: GLB\n"
            "    tile: {i: 4, j: 4, k: 4}\n    order: [k, i, j]\n" + glb_spatial +
            f"  - level: RF\n    tile: {{i: 1, j: {rf_j}, k: 1}}\n    order: [j]\n" + rf_spatial)


def test_check_mapping_file(capsys, tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(_yaml("GLB"))
    args = ("check", str(EX / "gemm.loop"), "--mapping", str(path), "--arch", "toy",
            "-D", "M=8", "-D", "N=8", "-D", "K=8", "--json")
    rc, out, err = run(capsys, *args)
    assert rc == 0, err
    assert json.loads(out)["legal"] is True
    path.write_text(_yaml("RF"))  # 4 lanes below an RF that feeds 1 compute unit
    rc, out, _ = run(capsys, *args)
    assert rc == 1
    assert [v["kind"] for v in json.loads(out)["violations"]] == ["fanout"]


def test_plot_and_dot(capsys, tmp_path):
    png, dot = tmp_path / "s.png", tmp_path / "s.dot"
    rc, _, err = run(capsys, "deps", str(EX / "seidel2d.loop"), "-D", "N=6", "--plot", str(png),
                     "--loops", "i,j", "--fix", "t=1", "--dot", str(dot))
    assert rc == 0, err
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert dot.read_text().startswith('digraph "seidel2d"')
    rc, _, err = run(capsys, "deps", str(EX / "seidel2d.loop"), "--plot", str(png), "--loops", "i,q")
    assert rc == 2 and "no loop 'q'" in err
