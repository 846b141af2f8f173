"""The command line run in-process, as the robustness tests drive it: exit status, output, no traceback."""
from __future__ import annotations

from pathlib import Path

from polymap.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``polymap ARGV`` through ``main``; its exit status, standard output and error (never a traceback)."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p
