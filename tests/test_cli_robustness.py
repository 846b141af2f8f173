"""Bad input never gives a traceback: exit 2 and a located ``FILE:LINE:COL: error:``.

Drives :func:`polymap.cli.main` in-process with adversarial files and
options for the finished commands (``show``, ``deps``, ``check``, ``run
--target reference``, ``arch``), and runs every example through ``show
--json``, ``deps --json`` and ``check --order <original order>``.
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

from polymap.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.loop")) + sorted((ROOT / "examples" / "polybench").glob("*.loop"))

GEMM = """\
kernel gemm(M = 4, N = 3, K = 5) where M >= 2 {
  in  A[M, K] : f32
  in  B[K, N] : f32
  out C[M, N] : f32
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""

TWO_NESTS = """\
kernel two(N = 4) {
  out X[N, N]
  out Y[N, N]
  for i in 0..N, j in 0..N { X[i, j] = i + j }
  for p in 0..N, q in 0..N { Y[p, q] = X[q, p] }
}
"""

NO_DEFAULT = """\
kernel nodef(N) {
  out X[N, N]
  for i in 0..N, j in 0..N { X[i, j] = 1 }
}
"""

TOY_MAPPING = """\
kernel: gemm
levels:
  - level: DRAM
  - level: GLB
    tile: {i: 2}
  - level: RF
    tile: {i: 1, j: 1, k: 1}
"""

COMMANDS = {
    "show": [],
    "deps": [],
    "check": ["--order", "i"],
    "run": [],
}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_bad(rc: int, err: str, where: Path | str | None = None, line: int | None = None) -> None:
    """Exit 2, no traceback, and ``FILE:LINE:COL: error:`` when a location exists."""
    assert rc == 2, err
    assert "Traceback" not in err
    assert "error:" in err
    if where is not None:
        pattern = re.escape(str(where)) + (rf":{line}:\d+: error:" if line is not None else r":\d+:\d+: error:")
        assert re.search(pattern, err), err


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in {"gemm.loop": GEMM, "two.loop": TWO_NESTS, "nodef.loop": NO_DEFAULT,
                       "map.yaml": TOY_MAPPING}.items():
        out[name] = tmp_path / name
        out[name].write_text(text)
    return out


# --------------------------------------------------------------------------- unreadable .loop files


@pytest.mark.parametrize("command", COMMANDS)
def test_unreadable_files(capsys, tmp_path, command):
    binary = tmp_path / "bin.loop"
    binary.write_bytes(b"\x00\x01\xff\xfe\x89PNG garbage")
    for path in (tmp_path / "missing.loop", tmp_path, binary):
        rc, _, err = run(capsys, command, path, *COMMANDS[command])
        assert_bad(rc, err)
        assert str(path) in err


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("text, line", [
    ("", 1),
    ("# only a comment\n", 1),
    ("kernel k(N = 4) {\n  out X[N]\n  for i in 0..N { X[i] = ", 3),
    ("kernel k(N = 4) {\n  out X[N]\n  for i in 0..N { X[i] = i }\n", 3),
    ("kernel k(N = 4) {\n  out X[N]\n  for i in 0..N { X[i] = " + "-" * 3000 + "1 }\n}\n", 3),
    ("kernel k(N = 4) {\n  out X[N]\n  for i in 0..N { X[i] = " + "+".join(["i"] * 1000) + " }\n}\n", 3),
], ids=["empty", "no-kernel", "eof-in-expression", "eof-before-brace", "deep-negation", "long-sum"])
def test_syntax_errors_are_located(capsys, tmp_path, command, text, line):
    path = tmp_path / "bad.loop"
    path.write_text(text)
    rc, _, err = run(capsys, command, path, *COMMANDS[command])
    assert_bad(rc, err, path, line)


# --------------------------------------------------------------------------- --kernel and -D


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_kernel(capsys, files, command):
    rc, _, err = run(capsys, command, files["gemm.loop"], *COMMANDS[command], "--kernel", "nope")
    assert_bad(rc, err)
    assert "nope" in err and "gemm" in err


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("define", ["N", "N=x", "N=", "=4", "N=1.5", "N=0", "N=-3", "Q=4",
                                    "N=99999999999999999999"])
def test_malformed_defines(capsys, files, command, define):
    argv = [command, files["gemm.loop"], *COMMANDS[command], "-D", define]
    if command == "check":
        argv[3] = "i,j,k"
    rc, _, err = run(capsys, *argv)
    assert_bad(rc, err)
    assert "-D" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_where_violation_points_at_the_clause(capsys, files, command):
    argv = [command, files["gemm.loop"], *COMMANDS[command], "-D", "M=1"]
    rc, _, err = run(capsys, *argv)
    assert_bad(rc, err, files["gemm.loop"], 1)
    assert "where" in err


def test_parameter_without_default(capsys, files, tmp_path):
    """Needed only where numbers are: run, deps --plot (show/deps/check stay symbolic)."""
    path = files["nodef.loop"]
    rc, _, err = run(capsys, "run", path)
    assert_bad(rc, err, path, 1)
    assert "'N'" in err
    rc, _, err = run(capsys, "deps", path, "--plot", tmp_path / "p.png")
    assert_bad(rc, err, path, 1)
    for argv in (["show", path], ["deps", path], ["check", path, "--order", "j,i"]):
        rc, _, err = run(capsys, *argv)
        assert rc == 0, err


# --------------------------------------------------------------------------- check --order


@pytest.mark.parametrize("order, words", [
    ("z", ["no loop 'z'"]),
    ("i,i,j", ["'i'", "twice"]),
    ("i,z", ["no loop 'z'"]),
    ("i,p", ["no single nest"]),
    ("", ["name the loops"]),
    (" , ", ["name the loops"]),
])
def test_check_bad_orders(capsys, files, order, words):
    rc, _, err = run(capsys, "check", files["two.loop"], "--order", order)
    assert_bad(rc, err)
    for w in words:
        assert w in err


def test_check_order_with_several_kernels_hints_at_kernel(capsys, files, tmp_path):
    path = tmp_path / "both.loop"
    path.write_text(GEMM + TWO_NESTS)
    rc, _, err = run(capsys, "check", path, "--order", "p,q")
    assert_bad(rc, err)
    assert "--kernel" in err
    rc, _, err = run(capsys, "check", path, "--order", "p,q", "--kernel", "two")
    assert rc == 0, err


# --------------------------------------------------------------------------- check --mapping / --arch


@pytest.mark.parametrize("text, line, words", [
    ("levels:\n  - level: DRAM\n   tile: [\n", 3, ["not valid YAML"]),
    ("- a\n- b\n", 1, ["a mapping file holds a mapping"]),
    ("just text\n", 1, ["a mapping file holds a mapping"]),
    ("levels: 5\n", 1, ["levels"]),
    ("levels:\n  - level: FOO\n  - level: BAR\n", 2, ["FOO", "--arch"]),
    ("kernel: lu\nlevels:\n  - level: DRAM\n  - level: GLB\n  - level: RF\n", 1, ["no kernel named 'lu'"]),
    ("nest: 5\nlevels:\n  - level: DRAM\n  - level: GLB\n  - level: RF\n", 1, ["no nest 5"]),
    ("nest: -1\nlevels:\n  - level: DRAM\n  - level: GLB\n  - level: RF\n", 1, ["no nest -1"]),
    ("a: &x [*x]\n", 1, ["alias"]),
    ("kernel: 2001-13-45\n", 1, ["timestamp"]),
    ("a: !!python/object:os.system x\n", 1, ["not valid YAML"]),
], ids=["syntax", "list", "scalar", "levels-int", "unknown-levels", "other-kernel", "nest-range",
        "nest-negative", "cyclic-alias", "bad-timestamp", "python-tag"])
@pytest.mark.parametrize("arch", [None, "toy"])
def test_check_bad_mappings(capsys, files, tmp_path, text, line, words, arch):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    extra = ["--arch", arch] if arch else []
    rc, _, err = run(capsys, "check", files["gemm.loop"], "--mapping", path, *extra)
    assert_bad(rc, err, path, line)
    if arch is None or "FOO" not in words:
        for w in words:
            assert w in err


def test_check_mapping_files_that_cannot_be_read(capsys, files, tmp_path):
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\x00\xff\xfe")
    for path in (tmp_path / "missing.yaml", tmp_path, binary, tmp_path / "empty.yaml"):
        if path.name == "empty.yaml":
            path.write_text("")
        rc, _, err = run(capsys, "check", files["gemm.loop"], "--mapping", path, "--arch", "toy")
        assert_bad(rc, err)
        assert str(path) in err


def test_check_mapping_with_bad_arch(capsys, files, tmp_path):
    nan = tmp_path / "nan.yaml"
    nan.write_text("name: t\nlevels:\n  - name: DRAM\n    read_energy: .nan\ncompute: {instances: 1}\n")
    for arch in (tmp_path / "missing.yaml", "nonexistent", nan):
        rc, _, err = run(capsys, "check", files["gemm.loop"], "--mapping", files["map.yaml"], "--arch", arch)
        assert_bad(rc, err)
    assert_bad(rc, err, nan, 4)
    rc, _, err = run(capsys, "check", files["gemm.loop"], "--mapping", files["map.yaml"], "--arch", "toy")
    assert rc == 0, err


# --------------------------------------------------------------------------- deps --plot / --dot


@pytest.mark.parametrize("options, words", [
    (["--loops", "q,r"], ["no loop 'q'"]),
    (["--loops", "i"], ["two loops"]),
    (["--loops", "i,i"], ["two different loops"]),
    (["--statement", "nope"], ["nope"]),
    (["--statement", "init", "--loops", "i,k"], ["no loop 'k'"]),
    (["--fix", "k"], ["LOOP=VALUE"]),
    (["--fix", "k=x"], ["LOOP=VALUE"]),
    (["--fix", "=3"], ["LOOP=VALUE"]),
    (["--fix", "q=1"], ["no loop 'q'"]),
    (["--fix", "j=1"], ["plotted"]),
    (["--fix", "i=100"], ["no instance"]),
    (["--fix", "i=99999999999999999999"], ["no instance"]),
])
def test_deps_plot_bad_options(capsys, files, tmp_path, options, words):
    rc, _, err = run(capsys, "deps", files["gemm.loop"], "--plot", tmp_path / "p.png", *options)
    assert_bad(rc, err)
    for w in words:
        assert w in err
    assert not (tmp_path / "p.png").exists()


def test_deps_output_files(capsys, files, tmp_path):
    for flag, target in (("--plot", tmp_path / "p.xyz"), ("--plot", tmp_path), ("--dot", tmp_path),
                         ("--plot", tmp_path / "no" / "p.png"), ("--dot", tmp_path / "no" / "g.dot")):
        rc, _, err = run(capsys, "deps", files["gemm.loop"], flag, target)
        assert_bad(rc, err)
    rc, _, err = run(capsys, "deps", files["gemm.loop"], "--plot", tmp_path / "plain")
    assert rc == 0, err
    assert (tmp_path / "plain").read_bytes()[:4] == b"\x89PNG"  # written under exactly that name


def test_deps_plot_large_slice_is_windowed(capsys, files, tmp_path):
    # a slice of a million instances is drawn as a small window, and the output says so
    rc, out, err = run(capsys, "deps", files["gemm.loop"], "--plot", tmp_path / "p.png",
                       "-D", "N=1000", "-D", "K=1000")
    assert rc == 0, err
    assert "window:" in out and "of 0..999" in out


# --------------------------------------------------------------------------- run --inputs


def _gemm_arrays(**changes) -> dict[str, np.ndarray]:
    arrays = {"A": np.ones((4, 5), np.float32), "B": np.ones((5, 3), np.float32)}
    arrays.update(changes)
    return arrays


@pytest.mark.parametrize("arrays, words", [
    (_gemm_arrays(A=np.ones((4, 5), np.float64)), ["'A'", "dtype"]),
    (_gemm_arrays(B=np.ones((3, 5), np.float32)), ["'B'", "shape"]),
    (_gemm_arrays(A=np.array(["x", "y"])), ["'A'"]),
    ({"A": np.ones((4, 5), np.float32)}, ["'B'"]),
], ids=["dtype", "shape", "strings", "missing"])
def test_run_misshapen_arrays_point_at_the_declaration(capsys, files, tmp_path, arrays, words):
    npz = tmp_path / "in.npz"
    np.savez(npz, **arrays)
    rc, _, err = run(capsys, "run", files["gemm.loop"], "--inputs", npz, "-o", tmp_path / "out.npz")
    assert_bad(rc, err, files["gemm.loop"])
    for w in words:
        assert w in err
    assert not (tmp_path / "out.npz").exists()


def test_run_unreadable_inputs(capsys, files, tmp_path):
    good = tmp_path / "good.npz"
    np.savez(good, **_gemm_arrays())
    data = good.read_bytes()
    corrupt = {
        "truncated.npz": data[: len(data) // 2],
        "damaged-member.npz": data[:100] + b"x" * 200 + data[300:],
        "garbage.npz": b"\x00garbage" * 50,
    }
    for name, blob in corrupt.items():
        (tmp_path / name).write_bytes(blob)
    with zipfile.ZipFile(tmp_path / "not-npy.npz", "w") as z:
        z.writestr("A.npy", b"\x93NUMPY garbage")
    np.save(tmp_path / "single.npy", np.ones(3))
    np.savez(tmp_path / "objects.npz", A=np.array([object()], dtype=object))
    for name in (*corrupt, "not-npy.npz", "single.npy", "objects.npz", "missing.npz", "."):
        path = tmp_path / name
        rc, _, err = run(capsys, "run", files["gemm.loop"], "--inputs", path)
        assert_bad(rc, err)
        assert str(path) in err
    for out in (tmp_path, tmp_path / "no" / "out.npz"):
        rc, _, err = run(capsys, "run", files["gemm.loop"], "--inputs", good, "-o", out)
        assert_bad(rc, err)


def test_run_sizes_too_large_to_allocate(capsys, tmp_path):
    path = tmp_path / "fill.loop"
    path.write_text("kernel fill(N = 4) {\n  out X[N]\n  for i in 0..N { X[i] = i }\n}\n")
    for n in ("999999999999", str(2**62)):
        rc, _, err = run(capsys, "run", path, "-D", f"N={n}")
        assert_bad(rc, err, path, 2)
        assert "'X'" in err


# --------------------------------------------------------------------------- arch


@pytest.mark.parametrize("text, line", [
    ("name: t\nlevels:\n  - name: DRAM\n    read_energy: .inf\ncompute: {instances: 1}\n", 4),
    ("name: t\nlevels:\n  - name: DRAM\n    write_energy: " + "9" * 400 + "\ncompute: {instances: 1}\n", 4),
    ("name: t\nlevels:\n  - name: DRAM\ncompute: {instances: 1, frequency: .nan}\n", 4),
    ("- a\n", 1),
    ("a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
     "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
     "f: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n", None),
], ids=["inf", "huge-int", "nan", "list", "alias-bomb"])
def test_arch_bad_files(capsys, tmp_path, text, line):
    path = tmp_path / "arch.yaml"
    path.write_text(text)
    rc, _, err = run(capsys, "arch", path)
    assert_bad(rc, err, path, line)


def test_arch_unknown_name(capsys):
    rc, _, err = run(capsys, "arch", "nonexistent")
    assert_bad(rc, err)
    assert "toy" in err  # the presets are listed
    rc, _, err = run(capsys, "arch")
    assert_bad(rc, err)


# --------------------------------------------------------------------------- every example


def _original_orders(path: Path) -> list[tuple[str, str]]:
    from polymap.driver import load_program
    from polymap.mapping.model import nest_loops

    return [(k.name, ",".join(nest_loops(k, 0))) for k in load_program(path).kernels if k.nests()]


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(ROOT / "examples")) for p in EXAMPLES])
def test_examples_never_traceback(capsys, path):
    for argv in (["show", path, "--json"], ["deps", path, "--json"]):
        rc, _, err = run(capsys, *argv)
        assert rc == 0, err
    for kernel, order in _original_orders(path):
        # 1 is possible: an order names each loop once, so sibling loops of one
        # name (softmax's three j loops) are fused, which can be illegal.
        rc, _, err = run(capsys, "check", path, "--kernel", kernel, "--order", order)
        assert rc in (0, 1), err
        assert "Traceback" not in err


def test_values_beyond_64_bits_never_reach_isl(capsys, files, tmp_path):
    """Counts, witnesses and plots evaluate ISL objects at the -D values (a C long)."""
    for argv in (["check", files["gemm.loop"], "--mapping", files["map.yaml"], "--arch", "toy"],
                 ["deps", files["gemm.loop"], "--plot", tmp_path / "p.png"]):
        rc, _, err = run(capsys, *argv, "-D", "K=99999999999999999999")
        assert_bad(rc, err)
        assert "64 bits" in err


def test_plot_options_without_plot(capsys, files):
    for option in (["--loops", "i,j"], ["--fix", "k=0"], ["--statement", "acc"]):
        rc, _, err = run(capsys, "deps", files["gemm.loop"], *option)
        assert_bad(rc, err)
        assert "--plot" in err
