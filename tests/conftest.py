"""Shared fixtures: ``golden`` files (``--update-golden`` rewrites them)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI gates landing on the suite: there the property tests draw the same
# examples every run (still hundreds of them), so a red run is reproducible.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

GOLDEN_DIR = Path(__file__).parent / "golden"


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
