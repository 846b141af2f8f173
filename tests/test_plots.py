"""The teaching pictures: what the roofline and the dependence slice draw, in numbers.

Each picture is computed as data first (``roofline_data``, ``slice_picture``)
and drawn after; these tests check the data against independent reckoning
(the roofline's ridge from the architecture alone, arrows against a
brute-force last-writer simulation) and the legends of the drawn figures.
"""
from __future__ import annotations

import shlex

from pathlib import Path

import pytest

from polymap.cli import main
from polymap.driver import load_program, parse
from polymap.machine.presets import load_architecture
from polymap.mapping.files import load_mapping
from polymap.passes.counting.cost_model import evaluate
from polymap.passes.counting.counting import count_mapping
from polymap.passes.dependences.dependences import dependences, group
from polymap.poly import build_model
from polymap.reports.dep_plot import STYLE, draw, slice_picture
from polymap.reports.roofline import draw_roofline, roofline_data

EX = Path(__file__).parent.parent / "examples"
SIZES = {"M": 64, "N": 64, "K": 64}


def _report():
    kernel = load_program(EX / "gemm.loop").kernels[0]
    arch = load_architecture("toy")
    mapping = load_mapping(EX / "gemm_toy.yaml", kernel=kernel, arch=arch)
    counts = count_mapping(build_model(kernel), mapping, arch, params=SIZES)
    return evaluate(counts, arch, active_units=1), arch


def test_roofline_bends_at_the_ridge(tmp_path):
    report, arch = _report()
    data = roofline_data(report, arch)
    assert data.peak == 16  # toy: 16 units x 1 op per cycle
    dram = next(r for r in data.roofs if r.level == "DRAM")
    glb = next(r for r in data.roofs if r.level == "GLB")
    assert dram.ridge == 16 / 8 and glb.ridge == 16 / 32
    assert dram.line[1] == (2.0, 16.0)  # the bend
    (x0, y0), _, (x2, y2) = dram.line
    assert y0 == pytest.approx(8 * x0) and y2 == 16.0 and x0 < dram.ridge < x2
    # the mapping at DRAM: 266,240 instances over 8,192 + 8,192 reads of A, B and 4,096 updates of C
    assert dict(data.points)["DRAM"] == pytest.approx(266_240 / (8_192 + 8_192 + 4_096))
    assert data.achieved == pytest.approx(266_240 / 266_240)
    labels = draw_roofline(data, str(tmp_path / "r.png"))
    assert labels[0] == "compute peak (16/cycle)"
    assert "DRAM roof (8 elem/cycle, ridge at 2)" in labels
    assert sum(label.startswith("mapping at ") for label in labels) == 3  # DRAM, GLB, RF: in the legend, not on the plot
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_cost_plot_writes_the_file(tmp_path, capsys):
    out = tmp_path / "roof.png"
    rc = main(["cost", str(EX / "gemm.loop"), "--arch", "toy", "--mapping", str(EX / "gemm_toy.yaml"),
               "-D", "M=64", "-D", "N=64", "-D", "K=64", "--plot", str(out)])
    assert rc == 0 and out.exists()
    assert "energy" in capsys.readouterr().out


def _seidel_raw_pairs(n: int, t_fixed: int, lo: int, hi: int) -> int:
    """Value-based RAW pairs of seidel2d inside one t slice and an i, j window, by simulation."""
    last: dict[tuple[int, int], tuple[int, int, int]] = {}
    pairs = 0
    for t in range(t_fixed + 1):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                for di in (-1, 0, 1):
                    for dj in (-1, 0, 1):
                        w = last.get((i + di, j + dj))
                        if w is not None and t == t_fixed and w[0] == t_fixed and \
                                lo <= i <= hi and lo <= j <= hi and lo <= w[1] <= hi and lo <= w[2] <= hi:
                            pairs += 1
                last[(i, j)] = (t, i, j)
    return pairs


def _picture(name: str, params: dict, **kw):
    kernel = load_program(EX / name).kernels[0]
    model = build_model(kernel)
    return slice_picture(model, group(dependences(model)), params=params, **kw)


def test_seidel_slice_arrows_match_a_simulation(tmp_path):
    pic = _picture("seidel2d.loop", {"T": 2, "N": 8}, loops=("i", "j"), fixed={"t": 1}, window=6, limit=10_000)
    raw = [a for a in pic.arrows if a.kind == "RAW"]
    assert len(raw) == _seidel_raw_pairs(8, 1, 1, 6)
    assert pic.window == {"i": (1, 6), "j": (1, 6)} and not pic.notes  # the whole slice fits: nothing to say
    assert {a.kind for a in pic.arrows} == {"RAW", "WAR"}  # WAW (1, 0, 0) leaves the t slice
    assert STYLE["RAW"][1:] != STYLE["WAR"][1:]  # dashed and bent: never drawn over a RAW arrow
    labels = draw(pic, str(tmp_path / "s.png"))
    assert labels == ["relax instances", "RAW A (relax)", "WAR A (relax)"]


def test_large_slices_are_windowed_and_arrows_capped():
    pic = _picture("gemm.loop", {"M": 256, "N": 256, "K": 256}, loops=("i", "j"))
    assert pic.ranges == {"i": (0, 255), "j": (0, 255)} and pic.window == {"i": (0, 7), "j": (0, 7)}
    assert len(pic.points["acc"]) == 64 and any(n.startswith("window: i in 0..7 of 0..255") for n in pic.notes)
    capped = _picture("seidel2d.loop", {"T": 2, "N": 30}, loops=("i", "j"), limit=25)
    assert len(capped.arrows) == 25 and capped.truncated
    assert any(n.startswith(f"drew 25 of {capped.pairs:,}") for n in capped.notes)


def test_dependences_between_two_statements_are_drawn():
    pic = _picture("jacobi2d.loop", {"T": 2, "N": 6}, loops=("i", "j"), statement="to_a", fixed={"t": 0})
    assert set(pic.points) == {"to_b", "to_a"}
    between = [a for a in pic.arrows if a.source != a.sink]
    assert between and all((a.source, a.sink) == ("to_b", "to_a") for a in between)
    # to_a(i, j) reads B at (i, j) and its four neighbours: one RAW arrow from each to_b instance inside
    raw = [a for a in between if a.kind == "RAW"]
    inner = range(1, 5)
    want = sum(1 for i in inner for j in inner for di, dj in ((0, 0), (0, 1), (0, -1), (1, 0), (-1, 0))
               if i + di in inner and j + dj in inner)
    assert len(raw) == want


def test_a_slice_without_dependences_says_so(tmp_path, capsys):
    src = tmp_path / "copy.loop"
    src.write_text("kernel copy(N = 4) {\n  in A[N, N]\n  out B[N, N]\n"
                   "  for i in 0..N, j in 0..N {\n    B[i, j] = A[i, j]\n  }\n}\n")
    png = tmp_path / "c.png"
    assert main(["deps", str(src), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {png}" in out and "no dependence has both ends in this slice" in out
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_deps_prints_exact_distance_vectors(capsys):
    assert main(["deps", str(EX / "seidel2d.loop")]) == 0
    out = capsys.readouterr().out
    assert "(0+, *, *)" not in out
    rows = [line.split() for line in out.splitlines()]
    assert ["(0,", "1,", "-1)", "i"] in rows and ["(1,", "-1,", "-1)", "t"] in rows


def test_dot_edges_carry_distances_and_loops(tmp_path, capsys):
    dot = tmp_path / "g.dot"
    assert main(["deps", str(EX / "gemm.loop"), "--dot", str(dot)]) == 0
    assert f"wrote {dot}" in capsys.readouterr().out
    text = dot.read_text()
    assert '"acc" -> "acc" [label="RAW C: (0,0,1) k\\nWAR C: (0,0,1) k\\nWAW C: (0,0,1) k"' in text
    assert '"init" -> "acc" [label="RAW C: (0,0) loop-independent' in text


def _readme_tours() -> list[tuple[str, list[str]]]:
    """Every ``$ polymap ...`` command of the README with the lines it shows (``...`` elides)."""
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    tours = []
    for block in readme.split("```")[1::2]:
        lines = block.strip("\n").splitlines()
        if lines and lines[0].startswith("$ polymap "):
            shown = [x.rstrip() for x in lines[1:] if x.strip() and x.strip() != "..."]
            if shown:  # a command shown without its output (the search's: minutes) has nothing to compare
                tours.append((lines[0][len("$ polymap "):], shown))
    return tours


TOURS = _readme_tours()


@pytest.mark.parametrize("command, shown", TOURS, ids=[c.split()[0] for c, _ in TOURS])
def test_readme_tour_reproduces(command, shown, capsys, monkeypatch):
    """Every line the README's tour shows appears in the command's output, in order (run from the
    repository's root, as the README's commands are)."""
    monkeypatch.chdir(Path(__file__).parent.parent)
    rc = main(shlex.split(command))
    assert rc in (0, 1)  # check's ILLEGAL answer is exit 1
    actual = iter(line.rstrip() for line in capsys.readouterr().out.splitlines())
    for line in shown:
        assert any(line == got for got in actual), f"README line not reproduced (or out of order): {line!r}"


def test_the_readme_tour_is_found():
    assert {c.split()[0] for c, _ in TOURS} >= {"show", "deps", "check", "cost"}
