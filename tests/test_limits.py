"""The six tracebacks of issue 14 and the stated limits: each input is an answer (exit 0/1) or a
located refusal (exit 2) naming the limit and how to raise it, never an exception.

Each test failed before its fix (ValueError in ast_build, RecursionError in
yamlsource, AssertionError in the reference, MemoryError on /dev/zero,
OSError on a full device, minutes of ISL on deep nests, many statements and
or-ed moduli).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from polymap.budget import Budget, BudgetExceeded, ChildFailed, Piece
from cli_run import run, write

from polymap.limits import Limits, parse_limits
from polymap.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "examples" / "gemm.loop"




# --------------------------------------------------------------------------- the six tracebacks

EMPTY_LOOP = """\
kernel k(N = 8) {
  inout A[N, N] : f64
  for i in 0..N {
    for j in N..0 {
      s: A[i, j] = A[i, j] + 1
    }
    t: A[i, 0] += 2
  }
  for i in N..0 {
    u: A[i, i] = 0
  }
}
"""


def test_a_loop_with_no_iteration_compiles_and_verifies(tmp_path, capsys):
    rc, out, err = run(capsys, "compile", write(tmp_path, "e.loop", EMPTY_LOOP), "-o", tmp_path / "out")
    assert rc == 0, err
    assert "verified against the reference" in out
    assert (tmp_path / "out" / "k.c").exists()


BIG_BOUND = """\
kernel k(N = 9223372036854775000) {
  inout A[N] : f64
  for i in 0..N {
    s: A[i] = A[i] + 1
  }
}
"""


def test_a_size_near_2_63_is_a_located_refusal(tmp_path, capsys):
    rc, out, err = run(capsys, "compile", write(tmp_path, "b.loop", BIG_BOUND), "-o", tmp_path / "out")
    assert rc == 2
    assert "b.loop:1:10: error: parameter N = 9223372036854775000" in err
    assert "--limit max_integer=N" in err


def test_a_constant_near_2_63_is_a_located_refusal(tmp_path, capsys):
    text = "kernel k(N = 8) {\n  inout x : f64\n  for i in 0..9223372036854775807 {\n    s: x += 1\n  }\n}\n"
    rc, out, err = run(capsys, "compile", write(tmp_path, "c.loop", text), "-o", tmp_path / "out", "--no-verify")
    assert rc == 2
    assert "c.loop:3:15: error: the constant 9223372036854775807" in err


def test_a_tensor_too_large_to_index_is_refused_by_run(tmp_path, capsys):
    rc, out, err = run(capsys, "run", GEMM, "-D", "M=4294967296", "-D", "K=4294967296", "--target", "c")
    assert rc == 2 and "tensor A has 18446744073709551616 elements" in err


@pytest.mark.parametrize("flow", [False, True])
def test_yaml_nested_hundreds_deep_is_refused_at_its_line(tmp_path, capsys, flow):
    text = "a: " + "[" * 500 + "]" * 500 + "\n" if flow else \
        "".join("  " * k + f"k{k}:\n" for k in range(400)) + "  " * 400 + "v: 1\n"
    deep = write(tmp_path, "deep.yaml", text)
    for argv in (("cost", GEMM, "--arch", deep, "--mapping", deep), ("arch", deep),
                 ("check", GEMM, "--mapping", deep, "--arch", "toy")):
        rc, out, err = run(capsys, *argv)
        assert rc == 2, argv
        assert ("deep.yaml:1:" if flow else "deep.yaml:65:") in err and "nests deeper than 64 levels" in err and "--limit yaml_depth=N" in err


def test_yaml_depth_can_be_raised(tmp_path, capsys):
    deep = write(tmp_path, "deep.yaml", "a: " + "[" * 80 + "]" * 80 + "\n")
    rc, out, err = run(capsys, "arch", deep, "--limit", "yaml_depth=200")
    assert rc == 2 and "nests deeper" not in err  # read, then refused as an architecture


def test_fortran_ordered_arrays_run_on_the_reference(tmp_path, capsys):
    rng = np.random.default_rng(1)
    a, b = rng.random((4, 5), dtype=np.float32), rng.random((5, 3), dtype=np.float32)
    np.savez(tmp_path / "in.npz", A=np.asfortranarray(a), B=np.asfortranarray(b))
    rc, out, err = run(capsys, "run", GEMM, "-D", "M=4", "-D", "N=3", "-D", "K=5",
                       "--inputs", tmp_path / "in.npz", "-o", tmp_path / "out.npz")
    assert rc == 0, err
    with np.load(tmp_path / "out.npz") as got:
        np.testing.assert_allclose(got["C"], a @ b, rtol=1e-5)


@pytest.mark.parametrize("role", ["kernel", "mapping", "arch", "inputs"])
def test_a_special_file_is_read_with_a_size_limit(capsys, role):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    argv = {"kernel": ("show", "/dev/zero"),
            "mapping": ("cost", GEMM, "--arch", "toy", "--mapping", "/dev/zero"),
            "arch": ("arch", "/dev/zero"),
            "inputs": ("run", GEMM, "-D", "M=2", "-D", "N=2", "-D", "K=2", "--inputs", "/dev/zero")}[role]
    start = time.monotonic()
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert "/dev/zero" in err and "larger than" in err and "(not a regular file)" in err
    assert time.monotonic() - start < 90  # seconds, not minutes (generous: CI machines are shared)


def test_a_small_file_limit_refuses_a_kernel(capsys):
    rc, out, err = run(capsys, "show", GEMM, "--limit", "file_bytes=100")
    assert rc == 2 and "larger than 100 bytes" in err and "--limit file_bytes=N" in err


def test_stdout_on_a_full_device_is_exit_2_without_traceback():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "polymap", "show", str(GEMM)], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "cannot write the standard output: No space left on device" in proc.stderr


# --------------------------------------------------------------------------- hangs become limits

def deep_nest(depth: int) -> str:
    loops = ", ".join(f"i{k} in 0..N" for k in range(depth))
    idx = ", ".join(f"i{k}" for k in range(depth))
    return (f"kernel d(N = 2) {{\n  inout A[N, N] : f64\n  in B[{', '.join(['N'] * depth)}] : f64\n"
            f"  for {loops} {{\n    s: A[i0, i1] += B[{idx}]\n  }}\n}}\n")


@pytest.mark.parametrize("command", ["check", "compile", "deps"])
def test_a_nest_14_deep_is_refused_quickly(tmp_path, capsys, command):
    f = write(tmp_path, "d.loop", deep_nest(14))
    extra = {"check": ("--order", ",".join(f"i{k}" for k in reversed(range(14)))),
             "compile": ("-o", str(tmp_path / "out")), "deps": ()}[command]
    start = time.monotonic()
    rc, out, err = run(capsys, command, f, *extra)
    assert rc == 2
    assert "d.loop:4:" in err and "14 loops deep" in err and "--limit nest_depth=N" in err
    assert time.monotonic() - start < 90  # seconds, not minutes (generous: CI machines are shared)


def many_statements(n: int) -> str:
    body = "\n".join(f"    s{k}: A[i] = A[i] + {k}" for k in range(n))
    return f"kernel s(N = 8) {{\n  inout A[N] : f64\n  for i in 0..N {{\n{body}\n  }}\n}}\n"


@pytest.mark.parametrize("command", ["check", "compile", "deps"])
def test_300_statements_are_refused_quickly(tmp_path, capsys, command):
    f = write(tmp_path, "s.loop", many_statements(300))
    extra = {"check": ("--order", "i"), "compile": ("-o", str(tmp_path / "out")), "deps": ()}[command]
    start = time.monotonic()
    rc, out, err = run(capsys, command, f, *extra)
    assert rc == 2
    assert "s.loop:124:5: error: kernel 's' has 300 statements" in err and "--limit statements=N" in err
    assert time.monotonic() - start < 90  # seconds, not minutes (generous: CI machines are shared)


def or_ed(terms: list[str]) -> str:
    return ("kernel o(N = 8) {\n  inout A[N] : f64\n  for i in 0..N {\n"
            f"    if {' or '.join(terms)} {{\n      s: A[i] = A[i] + 1\n    }}\n  }}\n}}\n")


@pytest.mark.parametrize("n, limit", [(40, "domain_pieces"), (3, "domain_moduli")])
def test_or_ed_moduli_are_refused_quickly(tmp_path, capsys, n, limit):
    f = write(tmp_path, "o.loop", or_ed([f"i % {k + 2} == 0" for k in range(n)]))
    start = time.monotonic()
    rc, out, err = run(capsys, "deps", f)
    assert rc == 2
    assert "o.loop:4:5: error: the iteration domain of statement 's'" in err and f"--limit {limit}=N" in err
    assert time.monotonic() - start < 90  # seconds, not minutes (generous: CI machines are shared)


def test_or_ed_conditions_within_the_limits_are_answered(tmp_path, capsys):
    f = write(tmp_path, "o.loop", or_ed([f"i == {3 * k}" for k in range(20)] + ["i % 2 == 0"]))
    rc, out, err = run(capsys, "deps", f, "--json")
    assert rc == 0, err


# --------------------------------------------------------------------------- the budget

def test_the_budget_refuses_with_the_reason(tmp_path, capsys):
    f = write(tmp_path, "d.loop", deep_nest(9))
    start = time.monotonic()
    rc, out, err = run(capsys, "compile", f, "-o", tmp_path / "out", "--budget", "2")
    assert rc == 2
    assert "the time budget of 2 s ran out during" in err and "--budget SECONDS" in err
    assert time.monotonic() - start < 90  # the budget plus the ISL step it was in


def test_budget_run_drops_a_piece_over_its_limit_and_refuses_past_the_deadline():
    budget = Budget(seconds=60)
    assert budget.run(time.sleep, (5,), limit=0.2, timed_out="late", what="a nap") == "late"
    assert budget.run(sum, ((1, 2),), limit=5, timed_out=None, what="a sum") == 3
    spent = Budget(seconds=0.3)
    with pytest.raises(BudgetExceeded, match="ran out during a nap"):
        spent.run(time.sleep, (5,), limit=10, timed_out="late", what="a nap")


def _fail(x):
    raise ValueError(f"no {x}")


def test_budget_run_all_gives_each_piece_what_run_gives_in_order():
    """``run_all`` runs the pieces two at a time (compile's candidates, issue 9): the answers, in the
    pieces' order, a late piece's ``timed_out``, a failing piece's error, the deadline's refusal."""
    budget = Budget(seconds=60)
    pieces = [Piece(time.sleep, (5,), None, 0.3, "late", "a nap"), Piece(sum, ((1, 2),), None, 5, None, "a sum"),
              Piece(max, (3, 9, 4), {}, 5, None, "a max"), Piece(time.sleep, (0.2,), None, 5, "late", "a short nap")]
    start = time.monotonic()
    assert budget.run_all(pieces, jobs=2) == ["late", 3, 9, None]
    assert time.monotonic() - start < 4.5  # the nap was stopped at its limit, not waited for
    assert budget.run_all(pieces, jobs=1) == ["late", 3, 9, None]  # one at a time: Budget.run's answers
    assert budget.run_all([], jobs=2) == []
    with pytest.raises(ChildFailed, match="ValueError: no 7"):
        budget.run_all([Piece(sum, ((1, 2),), None, 5, None, "a sum"), Piece(_fail, (7,), None, 5, None, "a fail")],
                       jobs=2)
    spent = Budget(seconds=0.3)
    with pytest.raises(BudgetExceeded, match="ran out during a nap"):
        spent.run_all([Piece(time.sleep, (5,), None, 10, "late", "a nap"), Piece(sum, ((1,),), None, 10, 0, "a sum")],
                      jobs=2)


def _mark(path: str) -> int:
    Path(path).write_text("ran")
    return 1


def test_budget_run_all_runs_its_last_piece_on_speculation_only_while_wanted(tmp_path):
    """``wanted``: the last piece runs beside the others (compile's original order, issue 9); once the
    others have answered, it is awaited when their results want it, else ended (or never started)
    with None; its error counts only when wanted."""
    budget = Budget(seconds=60)
    sums = [Piece(sum, ((1, 2),), None, 5, None, "a sum"), Piece(time.sleep, (0.3,), None, 5, "late", "a nap")]
    slow = Piece(time.sleep, (5,), None, 10, "late", "a long nap")
    for jobs in (1, 2, 3):
        start = time.monotonic()
        assert budget.run_all(sums + [slow], jobs=jobs, wanted=lambda rs: rs[0] == 4) == [3, None, None]
        assert time.monotonic() - start < 4  # ended when not wanted, not waited for
        mark = tmp_path / f"ran{jobs}"
        assert budget.run_all(sums + [Piece(_mark, (str(mark),), None, 5, None, "a mark")], jobs=jobs,
                              wanted=lambda rs: rs == [3, None]) == [3, None, 1]
        assert mark.read_text() == "ran"
        failing = Piece(_fail, (8,), None, 5, None, "a fail")
        assert budget.run_all(sums + [failing], jobs=jobs, wanted=lambda rs: False) == [3, None, None]
        with pytest.raises(ChildFailed, match="ValueError: no 8"):
            budget.run_all(sums + [failing], jobs=jobs, wanted=lambda rs: True)
    never = tmp_path / "never"  # one core, others not wanting it: never started
    budget.run_all(sums + [Piece(_mark, (str(never),), None, 5, None, "a mark")], jobs=1, wanted=lambda rs: False)
    assert not never.exists()


def test_a_piece_with_no_time_is_never_run(tmp_path):
    """A limit of 0 s (or less) answers ``timed_out`` without running the piece, in run, start and
    run_all alike (``budget._no_time``): forked, a piece that answers at once raced the parent's first
    poll, and under load (the parent descheduled after the fork) it won (the suite's choice with every
    limit at 0 s once chose a counted candidate over the original order)."""
    budget = Budget(seconds=60)
    mark = tmp_path / "ran"
    assert budget.run(_mark, (str(mark),), limit=0.0, timed_out="late", what="a mark") == "late"
    assert budget.start(_mark, (str(mark),), limit=0.0, timed_out="late", what="a mark").result() == "late"
    assert budget.start(_mark, (str(mark),), limit=-1.0, timed_out="late", what="a mark").result() == "late"
    for jobs in (1, 2):
        pieces = [Piece(_mark, (str(mark),), None, 0.0, "late", "a mark"), Piece(sum, ((1, 2),), None, 5, None, "a sum"),
                  Piece(_mark, (str(mark),), None, 0.0, "late too", "a mark")]
        assert budget.run_all(pieces, jobs=jobs) == ["late", 3, "late too"]
        assert budget.run_all(pieces[:1] + pieces[2:], jobs=jobs) == ["late", "late too"]  # nothing forked at all
        assert budget.run_all(pieces, jobs=jobs, wanted=lambda rs: True) == ["late", 3, "late too"]
    assert not mark.exists()


def test_budget_watch_stops_python_loops():
    budget = Budget(seconds=0.2)
    with pytest.raises(BudgetExceeded, match="ran out during spinning"):
        with budget.watch("spinning"):
            while True:
                pass


def test_bad_limits_and_budgets_are_bad_input(capsys):
    with pytest.raises(InputError, match="NAME one of file_bytes"):
        parse_limits(["depth=3"])
    with pytest.raises(InputError, match="at least 1"):
        parse_limits(["nest_depth=0"])
    assert parse_limits(["nest_depth=12"]) == Limits(nest_depth=12)
    rc, out, err = run(capsys, "show", GEMM, "--budget", "-1")
    assert rc == 2 and "--budget" in err


def test_a_step_beyond_64_bits_is_a_located_refusal(tmp_path, capsys):
    # fuzz seed 361: the reference's int64 range of the step overflowed (exit 3)
    text = ("kernel k(N = 8) {\n  inout x[N] : f64\n  for i in 0..N step 18446744073709551616 {\n"
            "    s: x[i] += 1\n  }\n}\n")
    rc, out, err = run(capsys, "compile", write(tmp_path, "s.loop", text), "-o", tmp_path / "out")
    assert rc == 2, err
    assert "s.loop:3:22: error: the step 18446744073709551616 of loop i" in err
    assert "--limit max_integer=N" in err
