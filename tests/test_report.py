"""``polymap report``: the HTML page's content, and the page opened in headless Chromium.

The browser test needs Debian's ``chromium`` (``.ci/run`` installs it); it is
skipped where there is none. It checks that the screenshot is not blank and
that the page's console holds exactly the page's own log line (a page with a
script error, opened the same way, shows that errors would be seen).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from polymap import api
from polymap.cli import main
from polymap.driver import load_program
from polymap.machine.presets import load_architecture
from polymap.mapping.files import load_mapping
from polymap.passes.counting.cost_model import Objective
from polymap.passes.search.choice import ChoiceOptions

EX = Path(__file__).parent.parent / "examples"
SIZES = ["-D", "M=64", "-D", "N=64", "-D", "K=64"]
SEIDEL_T_J_I = ("levels:\n  - level: DRAM\n    order: [t, j, i]\n  - level: GLB\n    tile: {t: 1, i: 1, j: 1}\n"
                "  - level: RF\n    tile: {t: 1, i: 1, j: 1}\n")


def _gemm_page(tmp_path: Path) -> Path:
    out = tmp_path / "gemm.html"
    rc = main(["report", str(EX / "gemm.loop"), "--arch", "toy", "--mapping", str(EX / "gemm_toy.yaml"),
               *SIZES, "-o", str(out)])
    assert rc == 0
    return out


def test_report_sections_and_self_contained(tmp_path, capsys):
    page = _gemm_page(tmp_path).read_text()
    assert f"wrote {tmp_path / 'gemm.html'}" in capsys.readouterr().out
    for heading in ("Dependences and loop classes", "Iteration space", "Legality of the mapping",
                    "The mapping as nested tiles", "Traffic per level and tensor", "Energy and cycles",
                    "Roofline", "Generated C code"):
        assert f"<h2>{heading}</h2>" in page
    assert page.count("<svg") >= 5  # slice, tiles, traffic bars, energy, roofline
    # nothing fetched from anywhere: no src= at all, links only to anchors of the page
    assert not re.search(r"\ssrc=", page) and not re.search(r'href="(?!#)', page)
    assert "The mapping is legal." in page and "void gemm(float *restrict A" in page
    # the counts of the README's cost tour: GLB B reads 262,144, energy 10,203,136 pJ
    assert "<td>GLB</td><td>B</td><td class=n>8,192</td><td class=n>0</td><td class=n>262,144</td>" in page
    assert "Energy 10,203,136 pJ" in page


def test_illegal_mapping_rings_the_witness(tmp_path):
    kernel = load_program(EX / "seidel2d.loop").kernels[0]
    arch = load_architecture("toy")
    path = tmp_path / "m.yaml"
    path.write_text(SEIDEL_T_J_I)
    mapping = load_mapping(path, kernel=kernel, arch=arch)
    params = {"T": 2, "N": 10}
    facts = api.report_facts([kernel], arch=arch, mapping=mapping, params=params)[0]
    verdict = api.check(kernel, mapping=mapping, arch=arch, params=params)
    assert not facts.verdict.legal and not verdict.legal
    w = next(v.witness for v in verdict.violations if v.witness is not None)
    assert facts.witness_labels == (f"witness source: {w.source}", f"witness sink: {w.sink}")
    for inst in (w.source, w.sink):  # both instances inside the drawn window
        assert facts.slice.position(inst.statement, dict(inst.values)) is not None
    assert facts.c_source == "" and "illegal" in facts.code_refusal
    out = tmp_path / "s.html"
    assert main(["report", str(EX / "seidel2d.loop"), "--arch", "toy", "--mapping", str(path), "-D", "T=2",
                 "-D", "N=10", "-o", str(out)]) == 0
    assert "The mapping is ILLEGAL." in out.read_text()


@pytest.mark.parametrize("objective", ["cycles", "energy"])
def test_report_without_mapping_shows_compiles_choice(tmp_path, objective):
    """The same function and options as compile: the page's mapping is the one compile writes."""
    kernel = load_program(EX / "gemm.loop").kernels[0]
    params = {"M": 64, "N": 64, "K": 64}
    choice = ChoiceOptions(objective=Objective.parse(objective), search_evaluations=0)
    compiled = api.compile(kernel, arch="toy", params=params,
                           options=api.CompileOptions(targets=("c",), verify=False, choice=choice))
    facts = api.report_facts([kernel], arch="toy", params=params, choice=choice)[0]
    assert compiled.mappings and facts.mapping == compiled.mappings[0]
    assert facts.mapping_source == "compile's choice"
    out = tmp_path / "gemm.html"
    assert main(["report", str(EX / "gemm.loop"), "--arch", "toy", *SIZES, "--objective", objective,
                 "--search-evaluations", "0", "-o", str(out)]) == 0
    page = out.read_text()
    assert "Mapping: compile&#x27;s choice." in page and "void gemm(" in page


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _open(html: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    shot = tmp_path / f"{html.stem}.png"
    profile = tmp_path / f"profile-{html.stem}"
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--window-size=1200,2400",
         f"--screenshot={shot}", html.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return shot, console


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed here (.ci/run installs it)")
def test_report_opens_in_chromium(tmp_path):
    import matplotlib.image

    page = _gemm_page(tmp_path)
    shot, console = _open(page, tmp_path)
    assert len(console) == 1 and '"polymap report: 1 kernel(s)"' in console[0], console
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[0] > 1000
    not_white = (pixels < 0.95).any(axis=2).mean()
    assert not_white > 0.03  # text, tables and pictures, not an empty page
    assert len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 50
    # the same way of opening sees script errors
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body>x<script>nosuch();</script></body></html>")
    _, console = _open(bad, tmp_path)
    assert any("Uncaught ReferenceError" in line for line in console)
