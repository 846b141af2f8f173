"""The arrays :func:`~polymap.passes.counting.execution.batch_execution` takes for a list of mappings of
one template, as the search builds them: the tests that hold the batch form equal to one by one."""
from __future__ import annotations

from typing import Mapping as MappingT, Sequence

import numpy as np

from polymap.mapping.model import Mapping
from polymap.passes.counting.execution import effective_tiles


def batch_arrays(rows: Sequence[Mapping], extents: MappingT[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """``(eff, declared)``: each row's effective tiles per level and loop, and the tiles it declares
    (0: none, the enclosing tile)."""
    eff = np.array([[[e[x] for x in mp.loops] for e in effective_tiles(mp, extents)] for mp in rows], dtype=np.int64)
    declared = np.array([[[0 if t is None else t for t in lm.tile] for lm in mp.levels] for mp in rows],
                        dtype=np.int64)
    return eff, declared
