"""A hoisted panel that opens nothing must not send the C printer round again (regression).

conv17's hoisted panels (packing.hoisted_packs) are re-offered to the same loop after they are
opened; a pack whose statement was not under the loop opened nothing, and the printer re-entered
the loop without end: `compile` of PolyBench's syrk, syr2k and gemm at LARGE sizes ended in a
RecursionError. The C at those sizes is checked against the reference by benchmarks/polybench_large.py;
here: that it is generated at all.
"""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("kernel, sizes", [("syrk", {"M": 1000, "N": 1200})])
def test_large_syrk_prints(tmp_path, kernel, sizes):
    defines = [x for p, v in sizes.items() for x in ("-D", f"{p}={v}")]
    proc = subprocess.run([sys.executable, "-m", "polymap", "compile", str(ROOT / "examples" / "polybench" / f"{kernel}.loop"),
                           *defines, "-o", str(tmp_path), "--no-verify", "--no-cache", "--target", "c"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout[-500:] + proc.stderr[-500:]
    assert "void syrk(" in (tmp_path / f"{kernel}.c").read_text()
