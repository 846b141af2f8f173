"""What the 10,000-case fuzz run of issue 14 found, each case reduced to its cause and kept.

Each test failed before its fix: a ``NotImplementedError`` escaping
``load_npz`` (a damaged compression method), an ``islpy.Error`` from a shape
such as ``-0*H``, compile's choice exiting 3 when a candidate source (isl's
scheduler, a lexmin) could not apply, and analyses answering minutes past
the budget inside one ISL call.
"""
from __future__ import annotations

import io
import struct
import time
from pathlib import Path

import numpy as np
import pytest

from polymap.cli import main
from polymap.errors import InputError
from polymap.tensors import load_npz

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --------------------------------------------------------------------------- .npz members zipfile cannot open

def _npz_with(*, method: int = 0, flag: int = 0, version: int = 20) -> bytes:
    """A NumPy archive whose central directory says ``method``, ``flag`` and the version to extract."""
    buf = io.BytesIO()
    np.savez(buf, A=np.arange(4.0))
    data = bytearray(buf.getvalue())
    at = data.index(b"PK\x01\x02")  # the central directory entry of the one member
    flags, = struct.unpack_from("<H", data, at + 8)
    struct.pack_into("<HHH", data, at + 6, version, flags | flag, method)
    return bytes(data)


@pytest.mark.parametrize("change, says", [
    (dict(method=99), "compression method 99"),   # zipfile: NotImplementedError "compression type 99"
    (dict(method=12), "compression method 12"),   # bzip2: NumPy never writes it
    (dict(flag=0x1), "is encrypted"),             # zipfile: RuntimeError "password required"
    (dict(flag=0x40), "strong encryption"),       # NotImplementedError
    (dict(flag=0x20), "patched data"),            # NotImplementedError
    (dict(version=119), "zip file version 11.9"),  # NotImplementedError, from ZipFile() itself (fuzz seed 664)
])
def test_an_npz_member_zipfile_cannot_open_is_bad_input(tmp_path, capsys, change, says):
    p = tmp_path / "in.npz"
    p.write_bytes(_npz_with(**change))
    with pytest.raises(InputError, match=says):
        load_npz(p)
    k = write(tmp_path, "k.loop", "kernel k(N = 4) {\n  in A[N] : f64\n  out B[N] : f64\n"
                                  "  for i in 0..N {\n    s: B[i] = A[i]\n  }\n}\n")
    rc, out, err = run(capsys, "run", k, "--inputs", p)
    assert rc == 2 and "in.npz" in err and says in err


# --------------------------------------------------------------------------- constant factors reaching ISL

def _kernel(extent: str, upper: str, index: str = "i") -> str:
    return (f"kernel k(H = 4) {{\n  inout A[{extent}] : f64\n  for i in 0..{upper} {{\n"
            f"    s: A[{index}] = A[{index}] + 1\n  }}\n}}\n")


@pytest.mark.parametrize("extent", ["(1 + 1) * H", "H * (3 - 1)", "-(-2) * H", "(-1) * (-2 * H)", "2*H + 0*H",
                                    "H * 2 - -0*H"])
def test_constant_factors_of_any_form_are_affine(tmp_path, capsys, extent):
    # every extent is 2H: a loop to 2H stays inside, one more iteration leaves it at A[2H] (i = 8 at H = 4)
    rc, out, err = run(capsys, "deps", write(tmp_path, "in.loop", _kernel(extent, "2 * H")))
    assert rc == 0, err
    rc, out, err = run(capsys, "show", write(tmp_path, "out.loop", _kernel(extent, "2 * H + 1")))
    assert rc == 2 and "A[i] writes A[8] when i = 8, but A has extent 8 in dimension 0" in err, err


def test_a_negated_zero_factor_is_an_empty_extent(tmp_path, capsys):
    rc, out, err = run(capsys, "show", write(tmp_path, "z.loop", _kernel("-0*H", "H")))
    assert rc == 2 and "but A has extent 0 in dimension 0" in err and "z.loop:4:" in err
