"""Where ``shared/`` (the specs, PolyBench/C 4.2.1) is: beside the checkout, as CI lays it, else /work/shared."""
from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
SHARED = next((p for p in (_ROOT.parent / "shared", Path("/work/shared")) if p.is_dir()), _ROOT.parent / "shared")
POLYBENCH = SHARED / "polybench"
