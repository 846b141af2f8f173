"""Where polymap keeps files for the user between runs (``cli.md``: ``$XDG_CACHE_HOME/polymap``,
else ``~/.cache/polymap``): built libraries, the tuning cache, the parser's tables.

One rule for the place, so that ``--no-cache`` users and tests that point
``XDG_CACHE_HOME`` at a temporary directory move all of it at once.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping


def user_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/polymap``, else ``~/.cache/polymap`` (not created here)."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "polymap"


def writable_dir(path: Path) -> Path | None:
    """``path``, created if need be, when this process may write there; else None (a read-only home,
    a file in the way): callers then go without their cache rather than fail."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK | os.X_OK) else None
