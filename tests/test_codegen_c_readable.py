"""Generated C a user can read and reuse: loops named after the kernel's iterators, a header
that states what the file is, helpers prefixed so that files can be included together."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np

from polymap.cli import main
from polymap.codegen.build import compiler, load_kernel
from polymap.codegen.c.emitter import emit_c
from polymap.driver import load_program
from polymap.machine.presets import load_architecture
from polymap.poly import build_model

from test_codegen_c import kernel_of, two_level

EXAMPLES = Path(__file__).parent.parent / "examples"


def loop_variables(source: str) -> list[str]:
    return re.findall(r"for \(long (\w+) =", source)


def test_loops_are_named_after_the_iterators_tile_loops_after_their_level():
    k = kernel_of("gemm")
    mp = two_level(k, {"i": 8, "j": 4}, ("i", "j", "k"), ("k", "i", "j"))
    source = emit_c(k, build_model(k), mp)
    names = set(loop_variables(source))
    assert {"i_DRAM", "j_DRAM", "i", "j", "k"} <= names, names
    assert not any(re.fullmatch(r"c\d+", n) for n in names)
    # and the code still computes gemm
    fn = load_kernel(source, k)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((11, 7)).astype(np.float32), rng.standard_normal((7, 9)).astype(np.float32)
    c = np.zeros((11, 9), np.float32)
    fn({"A": a, "B": b, "C": c}, {"M": 11, "N": 9, "K": 7})
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_original_order_uses_the_iterators_and_names_never_shadow():
    for name in ("lu", "jacobi2d", "softmax", "attention"):
        path = EXAMPLES / f"{name}.loop"
        if not path.exists():
            continue
        k = kernel_of(name)
        source = emit_c(k, build_model(k))
        variables = loop_variables(source)
        assert variables and not any(re.fullmatch(r"c\d+", n) for n in variables), (name, variables)
        taken = {d.name for d in k.decls} | {p.name for p in k.params}
        assert not set(variables) & taken, name


def test_the_header_states_kernel_sizes_architecture_mappings_and_command():
    k = kernel_of("gemm")
    mp = two_level(k, {"i": 8, "j": 4, "k": 2}, ("j", "i", "k"), ("k", "i", "j"))
    source = emit_c(k, build_model(k), mp, arch=load_architecture("toy"), params={"M": 16, "N": 12, "K": 8},
                    command="polymap compile gemm.loop --arch toy")
    head = source[:source.index("*/")]
    assert "kernel gemm (gemm.loop)" in head
    assert "Sizes: M=16, N=12, K=8" in head
    assert "Architecture: toy." in head
    assert "Nest 0 (loops i, j, k): DRAM order j, i, k; GLB tile i=8, j=4, k=2, order k, i, j." in head
    assert "Command: polymap compile gemm.loop --arch toy" in head
    assert "Command: polymap API" in emit_c(k, build_model(k))


def test_compile_writes_its_command_line(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["compile", str(EXAMPLES / "gemm.loop"), "-o", str(out), "-D", "M=16", "-D", "N=16", "-D", "K=16"]
    assert main(argv) == 0
    capsys.readouterr()
    head = (out / "gemm.c").read_text().split("*/")[0]
    assert f"Command: polymap compile {EXAMPLES / 'gemm.loop'} -o {out} -D M=16" in head
    assert "Sizes: M=16, N=16, K=16" in head


def test_two_generated_files_and_the_users_own_min_compile_together(tmp_path):
    """Every helper is prefixed: a file may #include several kernels next to its own min/max."""
    for name in ("gemm", "lu"):
        k = kernel_of(name)
        (tmp_path / f"{name}.c").write_text(emit_c(k, build_model(k)))
    user = tmp_path / "user.c"
    user.write_text("static int min(int a, int b) { return a < b ? a : b; }\n"
                    "static int max(int a, int b) { return a > b ? a : b; }\n"
                    "static int floord(int a, int b) { return a / b; }\n"
                    '#include "gemm.c"\n#include "lu.c"\n'
                    "int user(void) { return min(1, 2) + max(3, 4) + floord(5, 6); }\n")
    proc = subprocess.run([compiler(), "-fopenmp", "-Wall", "-Werror=implicit-function-declaration", "-c",
                           str(user), "-o", str(tmp_path / "user.o")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for name in ("gemm", "lu"):
        text = (tmp_path / f"{name}.c").read_text()
        assert not re.search(r"(?<![\w])(min|max|floord)\(", text), name
