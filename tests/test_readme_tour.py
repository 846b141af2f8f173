"""README's tour is what the commands print: each ``$ polymap ...`` block's output, run in-process from the
checkout's root, with a line ``...`` standing for any run of lines the README leaves out."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from cli_run import run

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```\n\$ polymap ([^\n]*)\n(.*?)```", re.S)


def _blocks() -> list[tuple[str, list[str]]]:
    text = (ROOT / "README.md").read_text()
    tour = text[text.index("## A tour of the commands"):text.index("## The Python API")]
    return [(cmd, out.splitlines()) for cmd, out in BLOCK.findall(tour) if out.strip()]


def _matches(expected: list[str], got: list[str]) -> bool:
    """Does ``got`` read as ``expected``, where a line ``...`` takes any run of lines (none included)?"""
    if not expected:
        return not got
    if expected[0].strip() == "...":
        return any(_matches(expected[1:], got[k:]) for k in range(len(got) + 1))
    return bool(got) and got[0] == expected[0] and _matches(expected[1:], got[1:])


def test_the_tour_has_blocks_with_output() -> None:
    assert {cmd.split()[0] for cmd, _ in _blocks()} >= {"show", "deps", "check", "cost"}


def test_matching_is_not_vacuous() -> None:
    assert _matches(["a", "  ...", "d"], ["a", "b", "c", "d"]) and _matches(["a", "...", "b"], ["a", "b"])
    assert not _matches(["a", "...", "d"], ["a", "b", "c"]) and not _matches(["a", "b"], ["a", "b", "c"])


@pytest.mark.parametrize("cmd, expected", _blocks(), ids=lambda v: v.split()[0] if isinstance(v, str) else "")
def test_the_tour_reproduces(cmd, expected, capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    rc, out, err = run(capsys, *shlex.split(cmd))
    got = out.rstrip("\n").splitlines()
    assert _matches(expected, got), f"README's `polymap {cmd}` differs from what it prints:\n{out}{err}"
