"""Running a C file through the system preprocessor, ready for pycparser.

``cc -E`` expands PolyBench's macros (``POLYBENCH_2D``, ``_PB_N``,
``DATA_TYPE``, ``SCALAR_VAL``) and keeps ``#pragma scop``; the text of system
headers (``<stdio.h>``, ``<math.h>``) is dropped, since pycparser cannot read
glibc's extensions and the scop never needs them, and a few typedef names
those headers would have declared are declared instead::

    #include <polybench.h>            ->   # 5 "gemm.c"
    DATA_TYPE POLYBENCH_2D(C,NI,NJ,ni,nj)     double C[20 + 0][25 + 0]

Line markers stay, so that every node pycparser builds points into the
user's own file.
"""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

from polymap.errors import EnvironmentProblem, InputError

#: Typedef names system headers declare and user code outside the scop uses.
_PRELUDE = "".join(f"typedef {t} {n};\n" for t, n in (
    ("int", "FILE"), ("unsigned long", "size_t"), ("long", "ssize_t"), ("long", "ptrdiff_t"),
    ("int", "bool"), ("int", "wchar_t"), ("int", "va_list"), ("int", "__builtin_va_list"),
    ("signed char", "int8_t"), ("short", "int16_t"), ("int", "int32_t"), ("long", "int64_t"),
    ("unsigned char", "uint8_t"), ("unsigned short", "uint16_t"), ("unsigned", "uint32_t"),
    ("unsigned long", "uint64_t"), ("long", "intptr_t"), ("unsigned long", "uintptr_t"),
    ("long", "time_t"), ("long", "clock_t")))

_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"((?:\s+\d+)*)\s*$')


def preprocess(path: Path, flags: str = "", *, compiler: str = "cc") -> str:
    """The preprocessed text of ``path`` without system headers (InputError on a preprocessor error)."""
    if shutil.which(compiler) is None:
        raise EnvironmentProblem(f"no C preprocessor: '{compiler}' is not on PATH (needed to read {path})")
    try:
        extra = shlex.split(flags)
    except ValueError as exc:
        raise InputError(f"--cpp {flags!r}: {exc}") from None
    cmd = [compiler, "-E", "-std=c99", "-D__attribute__(x)=", "-D__extension__=", *extra, str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise InputError(f"{path}: the C preprocessor failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")
    return _PRELUDE + strip_system_headers(proc.stdout)


def strip_system_headers(text: str) -> str:
    """Drop the lines that came from system headers (entered with line-marker flags 1 and 3)."""
    system: set[str] = set()
    keep: list[str] = []
    current = ""
    for line in text.splitlines():
        m = _MARKER.match(line)
        if m:
            current, flags = m.group(2), m.group(3).split()
            if "1" in flags and "3" in flags:
                system.add(current)
            if current not in system:
                keep.append(f'# {m.group(1)} "{current}"')
            continue
        if current not in system:
            keep.append(line)
    return "\n".join(keep) + "\n"


_ERROR = re.compile(r"^(.*?):(\d+):(\d+): error: (.*)$", re.M)


def compiler_error(path: Path, flags: str = "", *, compiler: str = "cc") -> tuple[str, int, int, str] | None:
    """The first located error ``cc -fsyntax-only`` reports in ``path``: (file, line, column, message)."""
    if shutil.which(compiler) is None:
        return None
    proc = subprocess.run([compiler, "-fsyntax-only", "-std=c99", *shlex.split(flags), str(path)],
                          capture_output=True, text=True)
    m = _ERROR.search(proc.stderr)
    return (m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)) if m else None
