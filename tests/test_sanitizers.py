"""Generated C under AddressSanitizer and UBSan on every example (original order; compile's default choice too for examples/*.loop).

Each kernel is built as a small executable (the generated file plus a
``main`` that allocates every tensor at its exact size and fills it with
positive values) with ``-fsanitize=address,undefined``; any out-of-bounds
access, overflow or other undefined behaviour makes it exit non-zero.
Sizes are small so that the whole file runs in well under a minute.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from polymap import ir
from polymap.machine.presets import load_architecture
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.c.expr import C_TYPES, c_name
from polymap.passes.search.choice import ChoiceOptions, choose
from polymap.driver import load_program
from polymap.poly import build_model
from polymap.tensors import shape_of

ROOT = Path(__file__).parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.loop")) + sorted((ROOT / "examples" / "polybench").glob("*.loop"))

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


def _driver(kernel: ir.Kernel, params: dict[str, int]) -> str:
    lines = ["#include <stdio.h>", "int main(void) {"]
    args = []
    for d in kernel.decls:
        if d.role == "local":
            continue
        size = 1
        for n in shape_of(d, params):
            size *= n
        t = C_TYPES[d.dtype]
        name = f"t_{d.name}"
        lines.append(f"  {t} *{name} = malloc(sizeof({t}) * {max(size, 1)});")
        # positive, diagonal-heavy data: no division by zero, no negative square roots
        lines.append(f"  for (long q = 0; q < {max(size, 1)}; q++) {name}[q] = ({t})(1 + q % 3);")
        args.append(name)
    args += [str(params[p]) for p in kernel.param_names]
    lines.append(f"  {c_name(kernel.name)}({', '.join(args)});")
    lines += [f"  free({a});" for a in args if a.startswith("t_")]
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


#: -O0: the sanitizers check every access and operation the C states (the optimiser removes none), and
#: the build takes a quarter of -O1's time (gemm's register-tiled C: 2.2 s of CPU against 8.4 s)
SANITIZE = ("-O0", "-g", "-fopenmp", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer")


def sanitized_build(src: Path, exe: Path, *flags: str) -> subprocess.CompletedProcess:
    """``src`` built into the executable ``exe`` under AddressSanitizer and UBSan (``flags`` added)."""
    return subprocess.run(["cc", *SANITIZE, *flags, str(src), "-o", str(exe), "-lm"], capture_output=True, text=True)


def _small(kernel: ir.Kernel) -> dict[str, int]:
    return {p.name: min(p.default or 6, 6) for p in kernel.params}


CASES = [pytest.param(path, id=str(path.relative_to(ROOT / "examples"))) for path in EXAMPLES]


@pytest.mark.parametrize("path", CASES)
def test_sanitized_run(path: Path, tmp_path: Path):
    program = load_program(path)
    arch = load_architecture("host")
    for kernel in program.kernels:
        params = _small(kernel)
        model = build_model(kernel)
        # compile's choice for the polybench kernels is covered by the top-level examples' shapes;
        # choosing it for every polybench kernel would cost more than the sanitized runs
        variants = [(kernel, model, ())]
        if path.parent.name != "polybench":
            choice = choose(kernel, arch, params, options=ChoiceOptions(search_evaluations=0))
            variants.append((choice.kernel, choice.model, choice.mappings))
        # no sizes given to the emitter: every parallel loop is shared out (hoisted regions included)
        for code_kernel, code_model, mappings in variants:
            src = tmp_path / f"{kernel.name}.c"
            src.write_text(emit_c(code_kernel, code_model, mappings) + _driver(kernel, params))
            exe = tmp_path / kernel.name
            build = sanitized_build(src, exe)
            assert build.returncode == 0, build.stderr
            env = {**os.environ, "OMP_NUM_THREADS": "2", "ASAN_OPTIONS": "detect_leaks=1"}
            run = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=60)
            assert run.returncode == 0, f"{kernel.name} {'mapped' if mappings else 'original'}:\n{run.stderr[-3000:]}"


# What `polymap compile` writes: its default choice (search, register tiles, packing) at the sizes it
# was compiled for, the C file read back from the output directory and run at those very sizes.
COMPILED = ["gemm", "2mm", "conv2d", "lu", "jacobi2d", "polybench/gramschmidt"]


def _compiled_sizes(kernel: ir.Kernel) -> dict[str, int]:
    # not multiples of the usual tiles (partial register and cache tiles); time loops short
    return {p.name: (3 if p.name.upper().startswith(("T", "STEP")) else min(p.default or 45, 45))
            for p in kernel.params}


@pytest.mark.slow
@pytest.mark.parametrize("name", COMPILED)
def test_sanitized_compile_output(name: str, tmp_path: Path):
    from polymap.cli import main

    path = ROOT / "examples" / f"{name}.loop"
    kernel = load_program(path).kernels[0]
    params = _compiled_sizes(kernel)
    defines = [x for p, v in params.items() for x in ("-D", f"{p}={v}")]
    rc = main(["compile", str(path), *defines, "--target", "c", "--no-verify", "-o", str(tmp_path / "out")])
    assert rc == 0
    written = (tmp_path / "out" / f"{kernel.name}.c").read_text()
    src = tmp_path / f"{kernel.name}_sanitized.c"
    src.write_text(written + _driver(kernel, params))
    exe = tmp_path / kernel.name
    build = sanitized_build(src, exe)
    assert build.returncode == 0, build.stderr
    env = {**os.environ, "OMP_NUM_THREADS": "2", "ASAN_OPTIONS": "detect_leaks=1"}
    run = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, f"{name} as compiled at {params}:\n{run.stderr[-3000:]}"
