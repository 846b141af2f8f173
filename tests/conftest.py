"""Shared fixtures: ``golden`` files (``--update-golden`` rewrites them)."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# CI gates landing on the suite: there the property tests draw the same
# examples every run (still hundreds of them), so a red run is reproducible.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

GOLDEN_DIR = Path(__file__).parent / "golden"

# compile consults the tuning cache ($XDG_CACHE_HOME/polymap/tuning): the suite gets its own,
# so that nobody's tuned choices change what the tests compile. Built libraries stay cached
# where they were (POLYMAP_CACHE, which codegen/build.py reads first).
if not os.environ.get("POLYMAP_CACHE"):
    os.environ["POLYMAP_CACHE"] = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "polymap")
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="polymap-test-xdg-")
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current output instead of comparing")


class Golden:
    """Compare text with ``tests/golden/NAME`` (or rewrite it with ``--update-golden``)."""

    def __init__(self, update: bool):
        self.update = update

    def check(self, name: str, text: str) -> None:
        path = GOLDEN_DIR / name
        if self.update or not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if not self.update:
                pytest.fail(f"golden file {path} did not exist; written now, check it and rerun")
            return
        assert text == path.read_text(), f"output differs from {path} (rerun with --update-golden if intended)"


@pytest.fixture
def golden(request) -> Golden:
    return Golden(request.config.getoption("--update-golden"))


@pytest.fixture
def budget_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What every ``Budget.run`` (or piece of ``Budget.run_all``, or ``Budget.start``) of the test was asked
    to run (its ``what``), in order; the runs still run."""
    from polymap.budget import Budget

    pieces: list[str] = []
    run, run_all, start = Budget.run, Budget.run_all, Budget.start

    def started(self, fn, args=(), kwargs=None, *, what, **options):
        pieces.append(what)
        return start(self, fn, args, kwargs, what=what, **options)

    def recorded(self, fn, args=(), kwargs=None, *, limit, timed_out, what):
        pieces.append(what)
        return run(self, fn, args, kwargs, limit=limit, timed_out=timed_out, what=what)

    def recorded_all(self, batch, *, jobs=None, **options):
        pieces.extend(p.what for p in batch)
        return run_all(self, batch, jobs=jobs, **options)

    monkeypatch.setattr(Budget, "run", recorded)
    monkeypatch.setattr(Budget, "run_all", recorded_all)
    monkeypatch.setattr(Budget, "start", started)
    return pieces
