"""Fuzz cases and their in-process runner: every case is one ``polymap`` command on mutated input.

A case is drawn from its seed alone (:func:`make_case`): a command (show,
deps, check, cost, transform, run, compile, arch), a base input (an
example kernel, the toy mapping and architecture, random arrays) and
mutations of :mod:`tests.fuzz.mutate`. :func:`run_case` runs it through
:func:`polymap.cli.main` in this process, with standard output and error
captured, under ``--budget`` and asserts the contract of ``cli.md``: no
exception escapes, no traceback is printed, the exit status is 0, 1 or 2,
and the answer comes within the budget (plus a grace for the step ISL was in).
"""
from __future__ import annotations

import contextlib
import io
import os
import random
import re
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from polymap.cli import main
from polymap.driver import parse
from polymap.tensors import io_tensors, random_inputs

from fuzz.mutate import mutate_loop, mutate_npz, mutate_yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.loop")) + sorted((ROOT / "examples" / "polybench").glob("*.loop"))
TOY_MAPPING = (ROOT / "examples" / "gemm_toy.yaml").read_text()
TOY_ARCH = (ROOT / "polymap" / "machine" / "presets" / "toy.yaml").read_text()
GEMM = (ROOT / "examples" / "gemm.loop").read_text()
COMMANDS = ("show", "deps", "check", "cost", "transform", "run", "compile", "arch")
WEIGHTS = (3, 3, 3, 2, 1, 2, 0.5, 1)


@dataclass(frozen=True)
class Case:
    seed: int
    command: str
    argv: tuple[str, ...]
    files: tuple[tuple[str, bytes], ...]  # name -> content, written into the case's directory


@dataclass(frozen=True)
class Outcome:
    case: Case
    status: int | None
    seconds: float
    problem: str | None  # None: the contract holds
    last_line: str = ""  # the last line the command wrote to stderr (why it said no, or refused)


def _small_defines(text: str, rng: random.Random) -> list[str]:
    names = sorted(set(re.findall(r"\b([A-Z][A-Z0-9_]*)\s*=\s*\d", text.split("{", 1)[0])))
    out = []
    for n in names:
        out += ["-D", f"{n}={rng.choice([1, 2, 3, 4, 5, 7, 8])}"]
    if rng.random() < 0.05 and names:
        out += ["-D", f"{rng.choice(names)}={rng.choice(['0', '-3', 'x', '9223372036854775807', '2**8'])}"]
    return out


def make_case(seed: int, *, commands: tuple[str, ...] = COMMANDS, budget: float = 20.0) -> Case:
    """The case of ``seed`` (the same seed, the same case)."""
    rng = random.Random(seed)
    weights = [w for c, w in zip(COMMANDS, WEIGHTS) if c in commands]
    command = rng.choices([c for c in COMMANDS if c in commands], weights)[0]
    common = ["--budget", str(budget)]
    if command == "arch":
        return Case(seed, command, ("arch", "arch.yaml", *common), (("arch.yaml", mutate_yaml(TOY_ARCH, rng).encode()),))
    if command in ("cost", "transform") or (command == "check" and rng.random() < 0.4):
        text = GEMM if rng.random() < 0.7 else mutate_loop(GEMM, rng)
        mapping = mutate_yaml(TOY_MAPPING, rng) if rng.random() < 0.8 else TOY_MAPPING
        arch = mutate_yaml(TOY_ARCH, rng) if rng.random() < 0.3 else TOY_ARCH
        files = (("k.loop", text.encode()), ("m.yaml", mapping.encode()), ("a.yaml", arch.encode()))
        defines = ["-D", "M=8", "-D", "N=8", "-D", "K=8"] if rng.random() < 0.8 else _small_defines(text, rng)
        return Case(seed, command, (command, "k.loop", "--mapping", "m.yaml", "--arch", "a.yaml", *defines, *common),
                    files)
    base = rng.choice(EXAMPLES).read_text()
    text = mutate_loop(base, rng) if rng.random() < 0.85 else base
    defines = _small_defines(base, rng)
    files = [("k.loop", text.encode())]
    argv = [command, "k.loop", *defines, *common]
    if command == "check":
        loops = re.findall(r"for (\w+) in", text)
        rng.shuffle(loops)
        argv += ["--order", ",".join(loops[: rng.randint(1, max(1, len(loops)))]) or "i"]
    elif command == "deps":
        argv += rng.choice([[], ["--memory-based"], ["--json"]])
    elif command == "show":
        argv += rng.choice([[], ["--json"]])
    elif command == "compile":
        argv += ["-o", "out", "--target", rng.choice(["c", "numpy", "c,numpy"])]
        argv += ["--no-verify"] if rng.random() < 0.5 else []
    elif command == "run":
        files.append(("in.npz", _npz(base, defines, rng)))
        argv += ["--inputs", "in.npz", "-o", "out.npz", "--target", rng.choice(["reference", "reference", "numpy"])]
    return Case(seed, command, tuple(argv), tuple(files))


def _npz(text: str, defines: list[str], rng: random.Random) -> bytes:
    try:
        program = load_program_text(text)
        kernel = program.kernels[0]
        params = {**{p.name: p.default for p in kernel.params},
                  **{d.split("=")[0]: int(d.split("=")[1]) for d in defines[1::2] if d.split("=")[1].isdigit()}}
        arrays = random_inputs(kernel, params, seed=rng.randrange(1000))
        arrays = {d.name: arrays[d.name] for d in io_tensors(kernel)}
    except Exception:  # noqa: BLE001 - an input the base kernel cannot give: some arrays anyway
        arrays = {"A": np.zeros((2, 2))}
    return mutate_npz(arrays, rng)


def load_program_text(text: str):
    return parse(text, "base.loop")


def run_case(case: Case, workdir: Path, *, budget: float = 20.0, grace: float = 30.0) -> Outcome:
    """Run ``case`` in ``workdir`` in this process; the contract's violation, if any, in ``problem``."""
    workdir.mkdir(parents=True, exist_ok=True)
    for name, content in case.files:
        (workdir / name).write_bytes(content)
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    start = time.monotonic()
    status, problem = None, None
    try:
        os.chdir(workdir)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(case.argv))
    except BaseException as exc:  # the contract: nothing escapes main
        problem = f"{type(exc).__name__} escaped: {exc}\n{traceback.format_exc()[-2000:]}"
    finally:
        os.chdir(cwd)
    seconds = time.monotonic() - start
    text = out.getvalue() + err.getvalue()
    if problem is None and "Traceback (most recent call last)" in text:
        problem = "a traceback was printed:\n" + text[-2000:]
    elif problem is None and status not in (0, 1, 2):
        problem = f"exit status {status}:\n{text[-1500:]}"
    elif problem is None and seconds > budget + grace:
        problem = f"answered after {seconds:.1f} s, beyond the budget of {budget:g} s"
    lines = err.getvalue().strip().splitlines()
    return Outcome(case, status, seconds, problem, lines[-1][:300] if lines else "")
