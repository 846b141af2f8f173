"""``check --suggest OUT.yaml``: the suggested skew as a mapping file that is legal and runs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from polymap.codegen.verify import verify
from polymap.driver import load_program
from polymap.machine.presets import load_architecture
from polymap.mapping.files import load_mapping
from polymap.passes.legality.legality import check_mapping
from polymap.poly import build_model

ROOT = Path(__file__).resolve().parent.parent


def test_suggested_skew_file_is_legal_and_verifies(tmp_path):
    out = tmp_path / "skew.yaml"
    run = subprocess.run([sys.executable, "-m", "polymap", "check", str(ROOT / "examples" / "seidel2d.loop"),
                          "--order", "t,j,i", "--suggest", str(out)], capture_output=True, text=True)
    assert run.returncode == 1  # the order itself is illegal
    assert f"wrote {out}" in run.stdout + run.stderr and "(legal)" in run.stdout + run.stderr
    kernel = load_program(ROOT / "examples" / "seidel2d.loop").kernels[0]
    mapping = load_mapping(out, kernel=kernel, arch=load_architecture("host"))
    assert mapping.schedule[0].exprs == ("t", "i + t", "j + 2*t + i")
    model = build_model(kernel)
    assert check_mapping(model, mapping).legal
    assert verify(kernel, {"T": 3, "N": 10}, targets=("c",), mapping=mapping, model=model).passed


def test_no_skew_no_file(tmp_path):
    out = tmp_path / "none.yaml"
    run = subprocess.run([sys.executable, "-m", "polymap", "check", str(ROOT / "examples" / "gemm.loop"),
                          "--order", "i,k,j", "--suggest", str(out)], capture_output=True, text=True)
    assert run.returncode == 0 and "no skew to suggest" in run.stdout and not out.exists()
