"""``benchmarks/polybench_large.py`` compares what PolyBench's programs really compute.

nussinov's "wrong kernel" was the harness: it patched every ``DATA_PRINTF_MODIFIER`` to ``%0.17g``,
so nussinov's (and floyd-warshall's) ``int`` table was printed with ``%g``, which is undefined
behaviour: both dumps were whatever a floating-point register held. These tests build PolyBench's
own nussinov with the harness's header and check its dump against the reference execution of
``examples/polybench/nussinov.loop`` on PolyBench's inputs (which also checks that the .loop
translation, ``match`` on ``char`` bases and ``max_score``, is PolyBench's kernel).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from polymap import api
from polymap.reference import execute

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import polybench_large  # noqa: E402

from shared_files import POLYBENCH  # noqa: E402
NUSSINOV = POLYBENCH / "medley" / "nussinov"

# PolyBench 4.2.1's three formats, as every one of its headers spells them
FORMATS = ('#  define DATA_PRINTF_MODIFIER "%d "\n'
           '#  define DATA_PRINTF_MODIFIER "%0.2f "\n'
           '#  define DATA_PRINTF_MODIFIER "%0.2lf "\n')


def test_only_floating_point_formats_print_every_digit() -> None:
    lines = polybench_large.full_precision_header(FORMATS).splitlines()
    assert lines == ['#  define DATA_PRINTF_MODIFIER "%d "',
                     '#  define DATA_PRINTF_MODIFIER "%0.17g "',
                     '#  define DATA_PRINTF_MODIFIER "%0.17g "']


@pytest.mark.skipif(not NUSSINOV.is_dir() or shutil.which("cc") is None, reason="needs PolyBench and cc")
def test_nussinov_dump_is_polybench_table(tmp_path: Path) -> None:
    """PolyBench's nussinov (N=60, built as the harness builds it) dumps the reference's table."""
    header = NUSSINOV / "nussinov.h"
    (tmp_path / header.name).write_text(polybench_large.full_precision_header(header.read_text()))
    (tmp_path / "nussinov.c").write_text((NUSSINOV / "nussinov.c").read_text())
    util = POLYBENCH / "utilities"
    exe = tmp_path / "original"
    polybench_large.build(["cc", *polybench_large.FLAGS, polybench_large.UNCONTRACTED, f"-I{util}",
                           "-DMINI_DATASET", "-DPOLYBENCH_TIME", "-DPOLYBENCH_DUMP_ARRAYS",
                           str(tmp_path / "nussinov.c"), str(util / "polybench.c"), "-o", str(exe), "-lm"])
    dump = polybench_large.run(exe, 1, dump=True)[1]["table"]

    kernel = api.load(ROOT / "examples" / "polybench" / "nussinov.loop").kernels[0]
    n = 60
    seq = np.array([(i + 1) % 4 for i in range(n)], dtype=np.int32)  # PolyBench's init_array
    table = execute(kernel, {"seq": seq, "table": np.zeros((n, n), dtype=np.int32)}, {"N": n})["table"]
    want = np.concatenate([table[i, i:] for i in range(n)])  # print_array: the upper triangle, by rows
    assert want.max() > 0  # the kernel did something: a dump of zeros would not test the format
    np.testing.assert_array_equal(dump, want.astype(np.float64))


@pytest.mark.skipif(not POLYBENCH.is_dir(), reason="needs PolyBench")
def test_every_example_finds_its_polybench_function() -> None:
    """``jacobi-2d``'s function is ``kernel_jacobi_2d``: hyphenated kernels were 'no kernel_jacobi-2d'."""
    for kernel in polybench_large.KERNELS:
        text = polybench_large.find_source(POLYBENCH, kernel).read_text()
        assert polybench_large.kernel_parameters(text, kernel), kernel


def test_a_dump_whose_first_value_follows_its_name_parses() -> None:
    """trisolv prints x[0] right after ``begin dump: x`` (its newline comes after the value, every
    20th): the harness read the name as ``x0`` and failed on ``end``. Text as PolyBench's macros print it."""
    text = ("==BEGIN DUMP_ARRAYS==\nbegin dump: x0.5 \n1.5 2.5 \nend   dump: x\n"
            "begin dump: A\n1 2 \nend   dump: A\n==END   DUMP_ARRAYS==\n")
    dumps = polybench_large.parse_dump(text)
    assert list(dumps) == ["x", "A"]
    assert dumps["x"].tolist() == [0.5, 1.5, 2.5] and dumps["A"].tolist() == [1.0, 2.0]
