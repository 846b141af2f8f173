"""The default mapping of a reduction nest on a CPU: BLIS-like blocks around a register tile.

For a nest whose last ``+=``/``-=`` statement writes ``C[.., i, j]`` from a
loop ``k`` that does not index ``C`` (gemm, the PolyBench BLAS kernels,
matrix-vector products), on an architecture with at least four levels
(``host``: DRAM, LLC, L2 x cores, L1 x cores, RF)::

    DRAM  whole nest, order i, j, k              (walks groups of one row block per core)
    LLC   tile {i: cores x rows}, spatial i      (one row block per core: one parallel region)
          order i, k, j                          (A's block stays for all groups of B's columns)
    L2    tile {i: rows, j: NB, k: KC}           (rows = M / cores, or when that is over MC, the
                                                  same number of blocks of at most MC per core;
                                                  keeps A's rows x KC block and B's KC x NB block,
                                                  packed there: NB / NR panels, 128 columns)
    L1    tile {i: rows, j: NR, k: KC} order j, i, k  (the KC x NR panel of B, a contiguous part
                                                   of the L2 panel, in L1)
    RF    tile {i: MR, j: NR}        order i, j    (MR x NR accumulators in registers)

The streamed form (session 26; :func:`stream_blocks`), taken instead where every read the tile
broadcasts (gemm's ``A[i, k]``: no ``j``) runs along ``k`` in memory and rows are not a triangle::

    DRAM  whole nest
    LLC   whole, spatial i, order i, k, j        (a core's whole share of rows, no row blocks)
    L2    tile {i: share, j: NB, k: KC}          (keeps B's KC x NB block only, packed there once
          order i, j, k                           per core, KC step and block; NB: a quarter of L2)
    L1    tile {i: MR, j: NB, k: KC} order j, i, k  (keeps the tile's MR x KC rows of A, read in
                                                   place, for the block's NB / NR panels)
    RF    tile {i: MR, j: NR}

B comes into L2 once per core and KC step (the grouped form above: once per row block of MC rows)
and stays there while all of the core's register tiles of rows stream past it.

Rows of unequal length (a triangle over parallel rows: covariance's ``j >= i``, syrk's ``j <= i``)
have no spatial level: the DRAM level walks blocks of at most MC rows (at least two per core), the
code shares that loop out and deals the blocks on demand (design.md, "A triangle's parallel loop is
dealt on demand").

With ``Blocking.nb`` 0 (or no room in L2 for a group of two panels) the L2 tile
is ``{i: rows, j: NC, k: KC}``, the LLC walks ``i, j, k``, and B's panels are
packed one at a time at L1 (before blas4; copying a panel at a time made every
row of B a page walk, RESULTS.md "where the GEMM time goes").

The C emitter (:mod:`polymap.codegen.c.regtile`) turns the RF box under the
``k`` loop into unrolled-and-jammed vector accumulators. ``j`` is the
target's last subscript (unit stride), ``i`` another bare subscript of it;
``k`` the longest loop that does not index the target; every other loop of
the nest is walked at the DRAM level.

Several reduction loops right inside the target's loops (conv2d's ``c, r, s`` under ``n, k, p, q``)
make one register tile (:attr:`Roles.reductions`): ``k`` is the outermost of them, blocked by KC, the
others whole above the registers and walked inside ``k`` by L1 and the registers, in their order.
Where the target's last loop cannot be a vector (conv2d's ``I[.., 2q + s]``), another loop of the
target whose reads are unit stride is (the output channels with ``W[c, r, s, k]``), the target's last
loop the rows and the target loaded lane by lane (:attr:`Roles.lanewise`; docs/design.md, "conv2d as
an implicit GEMM").

The register tile is shaped by the architecture's vector unit
(:class:`polymap.machine.arch.VectorUnit`, read from the CPU on ``host``):
NR is the most vectors of the element type that still leave 6 rows, MR as
many rows as the registers then hold after NR's vectors of B and one
broadcast of A, at most 14::

    AVX-512, 32 zmm:  f32  6 x 64 (24 accumulators), f64  6 x 32
    AVX2,    16 ymm:  f32  6 x 16 (12 accumulators), f64  6 x 8
    SSE,     16 xmm:  f32  6 x 8,                    f64  6 x 4

KC, MC and NC come from the capacities (:func:`cache_blocking`): KC the
larger of the KC x NR panel of B in half of L1 and a square MC x KC block
of A in half of L2, MC x KC of A in half of L2, the KC x NC panel of B in a
quarter of the last level per core; compile ranks this candidate with the
others by the exact counts. A box that cannot be vectorised
(``j`` not unit stride in some read) gets at most 16 scalar accumulators.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping as MappingT, Sequence

from polymap import ir
from polymap.machine.arch import Architecture, VectorUnit
from polymap.mapping.model import LevelMapping, Mapping, loop_extents, nest_loops, nest_tensors
from polymap.mapping.schedule import ScheduleEntry, schedule_entry
from polymap.passes.counting.fit import fanout_problems
from polymap.passes.legality.legality import is_legal
from polymap.passes.schedule.tiling import PHASE_BEFORE, loop_phase
from polymap.passes.dependences.loop_classes import loop_classes
from polymap.poly import KernelModel
from polymap.codegen.c.regtile import FOLDED_OPS
from polymap.passes.counting.execution import packable, vectorises


@dataclass(frozen=True)
class Blocking:
    """Block sizes: register tile MR x NR, reduction block KC, row block MC, column block NC.

    ``nb``: when not 0, B's KC x NB block (NB/NR panels) is kept at L2 and packed there at once,
    not one KC x NR panel at a time at L1 (the module docstring's "grouped B panels").
    ``stream``: with ``nb``, the streamed form where the nest has it (:func:`stream_blocks`: B's block
    at L2 for all of a core's rows, A read in place); False keeps the grouped row blocks.
    """

    mr: int = 6
    nr: int = 16
    kc: int = 256
    mc: int = 96
    nc: int = 1024
    nb: int = 0
    stream: bool = True


#: per element type, the blocking without a vector unit or caches to shape it (NR = two 32-byte vectors)
BLOCKINGS = {"f32": Blocking(6, 16, 256, 96, 1024), "f64": Blocking(6, 8, 256, 96, 512)}
SCALAR_BLOCKING = Blocking(4, 4, 256, 64, 512)
_ITEMSIZE = {"f32": 4, "f64": 8}


@dataclass(frozen=True)
class TileShape:
    """The register tile chosen for a vector unit, with the reason (written to compile's JSON)."""

    mr: int
    nr: int
    lanes: int
    accumulators: int
    why: str


#: the fewest rows of C a register tile keeps (the rows that share each vector of B): BLIS's 6
MIN_ROWS = 6


def register_shape(vector: VectorUnit | None, dtype: str, *, columns: int | None = None) -> TileShape:
    """MR x NR from the vector unit (see the module docstring); AVX2's 6 x 16 f32 when unknown.

    NR: the most vectors per row that still leave MIN_ROWS rows (MR rows x V vectors of
    accumulators + V vectors of B + 1 broadcast of A in the registers); MR: as many rows as then fit,
    at most 14. 16 registers: 2 vectors, 6 rows (12 + 2 + 1); 32: 4 vectors, 6 rows (24 + 4 + 1).
    Why not 14 x 2 vectors with 32 registers (28 + 2 + 1, the most accumulators): on the Zen 4 host
    the tile alone runs at the same rate in L1 in every shape (6 x 4, 8 x 3, 12 x 2, 14 x 2, 24 x 1
    vectors: 107-111 GFLOP/s f32), but the whole GEMM ran 6-10% faster with 6 x 4 (f32 1024 and
    f64 1024, single thread, interleaved; RESULTS.md "session 20 (blas5)"): a tile of fewer, longer
    rows of C, whose rows at a power-of-two stride all fall in the same L1 sets, loads and stores
    C in fewer sets and pages.

    ``columns``: the row loop's extent when the row is at most the vectors that cover it (a tile
    along conv2d's output channels, ``K`` of 16: one vector of 16 f32, 14 rows, where 4 vectors
    would be 3 masked-off ones); then MR as many rows as the registers hold, at most 14.
    """
    vector = vector if vector is not None else VectorUnit("avx2", 32, 16, True)
    lanes = max(2, vector.lanes(dtype))
    width = 2
    while (vector.registers - (width + 1) - 1) // (width + 1) >= MIN_ROWS:
        width += 1
    if columns is not None:
        width = max(1, min(width, -(-columns // lanes)))
    nr = width * lanes
    mr = max(1, min(14, (vector.registers - width - 1) // width))
    why = (f"{vector.isa}: {vector.registers} registers of {vector.vector_bytes} bytes, {lanes} x {dtype} "
           f"each; NR = {width} vectors ("
           + (f"covering {columns} columns" if columns is not None else f"the most that leave {MIN_ROWS} rows")
           + f"), MR = {mr} rows: "
           f"{mr * width} accumulators + {width} vectors of B + 1 broadcast of A <= {vector.registers}")
    return TileShape(mr, nr, lanes, width * mr, why)


def cache_blocking(arch: Architecture, dtype: str, shape: TileShape) -> Blocking:
    """KC, MC, NC from the capacities of L1, L2 and the last level (per core), rounded to tiles.

    KC: the larger of (1) the KC x NR panel of B in half of L1 and (2) A's MC x KC block square in
    half of L2 (MC = KC: per flop, B's refills fall as 1 / MC and C's as 1 / KC; for a given block
    size their sum is least when the two are equal). (1) decided alone before; with 4-vector rows
    (NR 64 f32 on AVX-512) it gives KC 64, and KC 256-352 measured 5-10% faster (RESULTS.md
    "session 20 (blas5)"); on AVX2 with 512 KiB of L2 (1) still decides (256 for f32 and f64).
    """
    size = _ITEMSIZE[dtype]
    caps = {lv.name: lv.capacity_bytes for lv in arch.levels if lv.capacity_bytes is not None}
    l1, l2 = caps.get("L1", 32 * 1024), caps.get("L2", 256 * 1024)
    llc = caps.get("LLC", 4 * l2)
    kc = max(16, (l1 // 2) // (shape.nr * size) // 16 * 16, math.isqrt((l2 // 2) // size) // 16 * 16)
    mc = max(shape.mr, (l2 // 2) // (kc * size) // shape.mr * shape.mr)
    nc = max(shape.nr, min(4096, (llc // 4) // (kc * size)) // shape.nr * shape.nr)
    return Blocking(shape.mr, shape.nr, kc, mc, nc, group_columns(l2, kc, mc, shape.nr, size))


#: B's columns packed at once (grouped panels): 128 reads each row of B as 512 B (f32) or 1 KiB (f64),
#: one page per row of the group instead of one per row of every panel (blas3: f64 +10-25%, f32 +4-9%)
GROUP_COLUMNS = 128


def group_columns(l2: int, kc: int, mc: int, nr: int, size: int) -> int:
    """B's columns kept at L2 beside A's MC x KC block: GROUP_COLUMNS, fewer when L2 has no room
    (whole panels, at least two; 0 when not even two fit: the panels stay at L1)."""
    room = (l2 - mc * kc * size) // (kc * size)
    cols = min(GROUP_COLUMNS, room) // nr * nr
    return cols if cols >= 2 * nr else 0


@dataclass(frozen=True)
class Roles:
    """The loops of the pattern: rows ``i`` (may be empty), unit-stride ``j``, reduction ``k``.

    ``reductions``: every reduction loop the register tile spans, in the original order (conv2d's
    ``c, r, s``; gemm's ``k`` alone): the accumulators stay in registers across all of them
    (:func:`polymap.codegen.c.regtile.match`). ``k`` is the first, the one blocked by KC; the others
    are whole at every level above the registers, so each element's updates keep their order.
    """

    i: str | None
    j: str
    k: str
    dtype: str
    vector: bool
    statement: str = ""  # the reduction statement (``acc``)
    reductions: tuple[str, ...] = ()
    #: ``j`` is not the target's last subscript (conv2d's output channels): the register tile loads and
    #: stores the target lane by lane, and its row is at most the vectors that cover ``j``
    lanewise: bool = False

    @property
    def reduction_loops(self) -> tuple[str, ...]:
        """``reductions``, or ``(k,)`` where a single loop is the reduction."""
        return self.reductions or (self.k,)


def find_roles(model: KernelModel, nest: int, extents: MappingT[str, int]) -> Roles | None:
    """The pattern's loops in ``nest``, or None when the nest has no such reduction."""
    loops = nest_loops(model.kernel, nest)
    dtypes = {d.name: d.dtype for d in model.kernel.decls}
    for s in reversed(model.nest_statements(nest)):
        stmt = s.stmt
        idx = stmt.target.indices
        if stmt.op not in ("+=", "-=") or not idx or dtypes[stmt.target.tensor] not in ("f32", "f64"):
            continue
        bare = [x.name for x in idx if isinstance(x, ir.Var) and x.name in s.loops]
        used = set().union(*(ir.variables(x) for x in idx))
        if not isinstance(idx[-1], ir.Var) or idx[-1].name not in bare:
            continue
        j = idx[-1].name
        i = next((x for x in reversed(bare[:-1]) if sum(x in ir.variables(y) for y in idx) == 1), None)
        free = [x for x in s.loops if x not in used]
        if not free or sum(j in ir.variables(y) for y in idx) != 1:
            continue
        k = max(free, key=lambda x: extents.get(x, 0))
        # several reduction loops nested right inside the target's loops (conv2d's ``c, r, s`` under
        # ``n, k, p, q``): one register tile spans them all, in their order, and only the outermost
        # may be blocked (a block of ``r`` around a whole ``c`` would reorder each element's
        # updates). Loops that do not index the target but sit outside one that does (doitgen's
        # ``r, q`` around ``p``) are not reductions of the tile: the single-loop pattern as before
        last = max(n for n, x in enumerate(s.loops) if x in used)
        trailing = tuple(x for x in s.loops[last + 1:] if x not in used)
        reductions = trailing if len(trailing) > 1 and k in trailing else ()
        if reductions:
            k = reductions[0]
        written = {t.stmt.target.tensor for t in model.nest_statements(nest)}
        # a strided read is packed with its row contiguous (codegen/c/packing.py) when it may be: the
        # register tile's rule for its vectors (execution.vectorises), with the reads it could pack
        def panel(r: ir.Ref) -> bool:
            return packable(r, written)
        vector = vectorises(stmt, j, tile=True, packed=panel)
        lanewise = False
        if not vector:
            # the target's last loop cannot be a vector (conv2d's ``I[.., 2*q + s]``): another loop that
            # indexes the target, along which every read is invariant or unit stride in place (the
            # output channels ``k`` with the weights ``W[c, r, s, k]``), is the vector loop, the
            # target's last loop the rows; the target is loaded and stored lane by lane
            # (docs/design.md, "conv2d as an implicit GEMM", step 3)
            axis = [x for x in bare[:-1] if x in loops and sum(x in ir.variables(y) for y in idx) == 1
                    and vectorises(stmt, x, tile=True, packed=panel)]
            if axis:
                i, j = j, max(axis, key=lambda x: extents.get(x, 0))
                vector = lanewise = True
        if not all(x in loops for x in (i, j, k) if x is not None):
            continue
        return Roles(i, j, k, dtypes[stmt.target.tensor], vector, s.name, reductions, lanewise)
    return None


def register_mappings(model: KernelModel, nest: int, arch: Architecture,
                      params: MappingT[str, int]) -> list[tuple[str, Mapping | None]]:
    """compile's candidate: the capacity blocking (:func:`cache_blocking`), labelled ``register tiles``.

    Its neighbours (KC halved and doubled) were candidates too (blas4), for the counts to rank; with
    the square-block KC rule the counts chose them where they measured slower (f32 1024: KC 704,
    0.89 of NumPy against 0.94 for the capacity KC 352; f64 2048: KC 128 by energy at equal cycles,
    1.11 against 1.16 single-threaded): the per-tile cost of loading C, which a larger KC amortises,
    is not in the counts (the model prices it since session 21, :func:`execution.pass_factor`, but
    that favours a larger KC, and KC 704 measured slower; the neighbours stay out)."""
    return [("register tiles", register_mapping(model, nest, arch, params))]


def register_mapping(model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int], *,
                     blocking: Blocking | None = None) -> Mapping | None:
    """The mapping of the module docstring, or None (pattern absent, too few levels, does not fit)."""
    if len(arch.levels) < 4:
        return None
    kernel = model.kernel
    loops = nest_loops(kernel, nest)
    extents = loop_extents(kernel, nest, params)
    roles = find_roles(model, nest, extents)
    if roles is None:
        return None
    if blocking is None:
        shape = register_shape(arch.vector, roles.dtype) if roles.vector and arch.vector is not None else None
        if shape is not None and roles.lanewise:
            shape = register_shape(arch.vector, roles.dtype, columns=extents.get(roles.j))
        # the box is the vector unit's even where another statement of the nest doubles it in the
        # counts (covariance's mirror ``cov[j, i] = cov[i, j]``: 6 x 32 f64 and its mirror, 423
        # elements in 256): the code runs that statement in a loop of its own, and halving the box
        # to fit the counts (cov6: 6 x 16) ran 1.3x slower (docs/design.md, "The register box is
        # the vector unit's")
        blocking = cache_blocking(arch, roles.dtype, shape) if shape is not None else \
            (BLOCKINGS[roles.dtype] if roles.vector else SCALAR_BLOCKING)
    b = blocking
    i, j, k = roles.i, roles.j, roles.k
    red = roles.reduction_loops  # (k,), or conv2d's c, r, s: those after k whole above the registers
    mr = b.mr if i is not None else 1
    others = tuple(x for x in loops if x not in (i, j) + red)
    n = len(arch.levels)
    cores = max(1, arch.inner_instances(n - 4) // arch.levels[n - 4].instances)

    def tile(rows: int | None, cols: int | None, red_block: int | None) -> tuple:
        sizes = {i: rows, j: cols, k: red_block, **{x: None for x in red[1:]}}
        out = []
        for x in loops:
            t = sizes.get(x, 1) if x in sizes else 1
            out.append(None if t is None or t >= max(1, extents.get(x, 1)) else t)
        return tuple(out)

    # not clipped to small loops: a partial register tile is one masked edge box
    rf = tuple({i: mr, j: b.nr}.get(x, 1) for x in loops)
    ij = tuple(x for x in (i, j) if x is not None)
    keep = nest_tensors(kernel, nest)
    # one chunk of the parallel loop per core, a whole number of register tiles: the rows when
    # no dependence crosses them, else the columns (trmm's rows read the rows below them, which
    # are updated later: its columns are independent), else none
    par = parallel_loop(model, roles, nest)
    step = mr if par == i else b.nr
    chunk = -(-max(1, extents.get(par or j, 1)) // cores)
    chunk = -(-chunk // step) * step
    if par is not None and par != i and bounds_coupled(kernel, nest, par):
        # a triangle (covariance's rows i <= j under its columns j): one contiguous chunk per core
        # left one thread 75% of the work; panels of one register tile, which the code deals
        # round-robin (the OpenMP loop over them is uneven: emitter._uneven)
        chunk = step
    rows = b.mc if i is not None else None
    whole = tuple(None for _ in loops)
    outer_first = others + tuple(x for x in loops if x not in others)  # every loop once
    top, group = (whole, outer_first, ()), whole
    # a core's rows in blocks of about MC (the nearest whole number of them, so at most 1.5 MC: the
    # L2 tile's block of A still fits L2, and is packed there); the DRAM level walks groups of one
    # block per core, the LLC level spreads a group over the cores: every core gets as many blocks.
    # Rounding up instead cut 516 rows (f32 1024, 2 cores, MC 252) into 3 blocks of 174, which ran
    # slower than 2 of 258 (B's panel is packed once per block)
    blocks = (chunk + b.mc // 2) // b.mc if par is not None and par == i else 1
    # rows of unequal length (covariance's triangle j >= i): one contiguous chunk of rows per core
    # gives the first core 75% of the work, and groups of one block per core give the first block
    # of every group more; the DRAM level walks blocks of MC rows instead, no spatial level, so that
    # the blocks are the parallel loop, dealt one at a time as threads come free (the emitter's
    # rule for loops of uneven work), the longest rows first. Each block is gemm's: its MC x KC
    # block of A packed in L2 once for all of the row's columns (the column panels of the round-
    # robin mapping this replaces re-read their rows' A from the last level, strided, per panel)
    triangle = par is not None and par == i and bounds_coupled(kernel, nest, i)
    if triangle:
        # at least two blocks per core: the code shares out a loop of at least 2 x threads iterations
        # (codegen/c/parallel.py), and on-demand dealing balances only with blocks to spare
        rows = chunk = min(b.mc, -(-(-(-max(1, extents.get(i, 1)) // (2 * cores))) // mr) * mr)
        blocks = 0
        top = (whole, others + (i,) + tuple(x for x in loops if x not in others + (i,)), ())
        group = tile(rows, None, None)
    share = chunk  # a core's rows, whole register tiles
    if blocks >= 2:
        rows = -(-(-(-max(1, extents.get(i, 1)) // (blocks * cores))) // mr) * mr
        chunk = rows
        top = (whole, others + (i,) + tuple(x for x in loops if x not in others + (i,)), ())
        group = tile(rows * cores, None, None)
    if par is not None and par == i:
        # the L1 tile's rows are the L2 block's (a core's chunk, under MC or up to 1.5 MC): MC rows in
        # L1 under a smaller chunk made the inner tile grow past its enclosing one
        rows = chunk
        l2 = tile(chunk, b.nc, b.kc)
    elif par is not None and i is not None:  # a chunk of columns per core, all rows
        l2 = tile(None, min(b.nc, chunk), b.kc)
    else:
        l2 = tile(chunk if i else rows, b.nc if i else chunk, b.kc)
    first = par or (i if i is not None else j)
    inner = tuple(x for x in (i, j) + red if x not in (None, first))
    keeps = {}
    # grouped B panels: L2 keeps A's block and B's KC x NB block (packed there, NB / NR panels at once,
    # in B's memory order), L1 keeps no B; the last level walks k outside j, so that A's block stays
    # for all of a row block's groups (filled, and packed, once per KC step)
    nb = _grouped(arch, n, b, roles, rows, extents) if par is not None and par == i else 0
    if nb:
        l2 = tile(chunk, nb, b.kc)
        inner = red + (j,)
        keeps[n - 3] = tuple(x for x in keep if x not in _written(model, nest))
    l1 = (tile(rows, b.nr, b.kc), others + (j,) + ((i,) if i else ()) + red, ())
    # B's block at L2 for all of a core's rows, A's rows read in place (session 26): see stream_blocks
    streamed = stream_blocks(model, nest, roles, arch.levels[n - 3].capacity_bytes, b, extents) \
        if nb and b.stream and not triangle else None
    if streamed is not None:
        cols, broadcast = streamed
        top, group = (whole, outer_first, ()), whole
        l2 = tile(share, cols, b.kc)
        inner = red + (j,)
        keeps[n - 3] = tuple(x for x in keep if x not in _written(model, nest) and x not in broadcast)
        keeps[n - 2] = tuple(x for x in keep if x in broadcast)
        l1 = (tile(mr, cols, b.kc), others + (j, i) + red, ())
    specs = {
        0: top,
        n - 4: (group, (first,) + inner + others, (par,) if cores > 1 and par is not None and not triangle else ()),
        n - 3: (l2, ij + red + others, ()),
        n - 2: l1,
        n - 1: (rf, others + red + ij, ()),
    }
    levels = []
    for lv in range(n):
        t, order, spatial = specs.get(lv, (whole, outer_first, ()))
        levels.append(LevelMapping(arch.levels[lv].name, t, tuple(order), spatial, keeps.get(lv, keep)))
    out = Mapping(kernel.name, nest, tuple(loops), tuple(levels))
    if fanout_problems(out, arch, extents):
        levels[n - 4] = dataclasses.replace(levels[n - 4], spatial=())
        out = Mapping(kernel.name, nest, tuple(loops), tuple(levels))
    folded = dataclasses.replace(out, schedule=folded_inits(model, nest, roles, tuple(loops)))
    # the exact check decides, never the pattern: a fold that would reorder dependent instances is left out
    return folded if folded.schedule and is_legal(model, folded) else out


def folded_inits(model: KernelModel, nest: int, roles: Roles, loops: tuple[str, ...]) -> tuple[ScheduleEntry, ...]:
    """Schedule entries that place each initialisation of the target right before its first update.

    A statement ``init: C[i, j] = v`` (or ``*= v``: 2mm's ``D *= beta``; :data:`FOLDED_OPS`) before the
    reduction loop ``k`` of ``acc: C[i, j] += ...`` (same target, all of acc's loops but ``k``, ``v``
    not reading the target's tensor) runs, by the
    phase rule of ``mapping.md``, before every tile of ``k`` at every level: with the DRAM level's
    whole tiles, a separate pass over all of C before the first update (the generated C had two
    OpenMP regions, the first walking C in 6 x 64 tiles: 4-7% of a 11 ms f32 1024 call). The entry
    ``init: {i: i, j: j, k: lo}`` (``lo`` k's constant lower bound) gives it the coordinates of
    ``acc(i, j, lo)``, which it precedes in the text: it runs right before C[i, j]'s first update,
    in the first block of ``k`` (BLIS's beta = 0). The counts then see no pass of its own: C's first
    residency in the registers begins with the plain write (not filled), and the register tile
    starts its accumulators from ``v`` there instead of loading C (:mod:`polymap.codegen.c.regtile`).
    """
    kernel = model.kernel
    stmts = {s.name: s for s in model.nest_statements(nest)}
    acc = stmts.get(roles.statement)
    bounds = [] if acc is None else [lp for lp in acc.context.loops if lp.var == roles.k]
    if len(bounds) != 1 or len(bounds[0].lower) != 1 or not isinstance(bounds[0].lower[0], ir.Const):
        return ()
    lower = str(bounds[0].lower[0].value)
    entries = []
    for s in stmts.values():
        stmt = s.stmt
        reads = {r.tensor for r in ir.subexpressions(stmt.value) if isinstance(r, ir.Ref)}
        if (s is acc or stmt.op not in FOLDED_OPS or _names(stmt.target) != _names(acc.stmt.target) or stmt.target.tensor in reads
                or roles.k in s.loops or set(s.loops) != set(acc.loops) - {roles.k}
                or loop_phase(kernel, nest, s.context, roles.k) != PHASE_BEFORE):
            continue
        out_loops = tuple(x for x in loops if x in s.loops or x == roles.k)
        entries.append(schedule_entry(model, s.name, out_loops, tuple(lower if x == roles.k else x for x in out_loops)))
    return tuple(entries)


def _names(r: ir.Ref) -> tuple | None:
    """``(tensor, iterator names)`` of a reference by bare iterators (None otherwise): the same element
    for the same values, whatever the references' places in the text."""
    if not all(isinstance(x, ir.Var) for x in r.indices):
        return None
    return (r.tensor,) + tuple(x.name for x in r.indices)


def bounds_coupled(kernel: ir.Kernel, nest: int, loop: str) -> bool:
    """Does the work per iteration of ``loop`` vary: a bound of another loop of the nest depends on
    it, or its own bounds on another loop (``for i, j in i..M``: ``j`` and ``i`` both)?"""
    found = False

    def walk(nodes: Sequence[ir.Node], outer: frozenset) -> None:
        nonlocal found
        for node in nodes:
            if isinstance(node, ir.Loop):
                used = set().union(*(ir.variables(e) for e in node.lower + node.upper))
                if (node.var == loop and used & outer) or (node.var != loop and loop in used):
                    found = True
                walk(node.body, outer | {node.var})
            elif isinstance(node, ir.If):
                walk(node.then, outer)
                walk(node.orelse, outer)

    walk((kernel.nests()[nest],), frozenset())
    return found


def _grouped(arch: Architecture, n: int, b: Blocking, roles: Roles, rows: int | None,
             extents: MappingT[str, int]) -> int:
    """B's columns kept at L2 for the row blocks of ``rows`` (0: B's panels one at a time at L1)."""
    cap = arch.levels[n - 3].capacity_bytes
    if not b.nb or not roles.vector or roles.i is None or cap is None or rows is None:
        return 0
    nb = min(b.nb, group_columns(cap, b.kc, rows, b.nr, _ITEMSIZE[roles.dtype]))
    # a loop no longer than one panel gains nothing from groups
    return nb if extents.get(roles.j, 0) > b.nr else 0


#: the share of L2 that B's KC x NB block takes in the streamed form (stream_blocks): measured at
#: f32 2048 on the Intel host (2 MiB L2, KC 512), NB 128 / 256 / 512 ran at 135.6 / 141.0 / 139.1
#: GFLOP/s (one thread, CPU time, load 3.7; RESULTS.md "session 26 (gemm15)")
STREAM_SHARE = 4


def stream_blocks(model: KernelModel, nest: int, roles: Roles, l2: int | None, b: Blocking,
                  extents: MappingT[str, int]) -> tuple[int, frozenset[str]] | None:
    """B's columns kept at L2 for all of a core's rows, and the tensors read in place; None when the
    nest does not have that form.

    The form (session 26): L2 keeps B's KC x NB block (a quarter of L2: ``STREAM_SHARE``), packed
    there once per core, KC step and block, and the core's whole share of rows walks it one register
    tile of rows at a time; L1 keeps that tile's MR x KC rows of A, which the register tile
    broadcasts and reads in place (each row a contiguous run along the reduction: MR streams the
    hardware prefetches; copying them per tile, for NB / NR panels of reuse, measured 15% slower).
    Before, L2 kept A's MC x KC block (packed) and B's KC x 128 group beside it, so B came into L2
    once per row block of MC rows: at f32 2048 on 2 cores 2 x 516 rows per core, B packed twice,
    and every group re-filled from L3 (measured: the streamed form +6-9% single-threaded, +8% on two
    cores in CPU time). Needs every read the register tile broadcasts (no ``j``) to be a view of
    distinct bare loops over ``i`` and ending in ``k``, of a tensor the nest does not write and the
    tile does not also read along ``j``."""
    size = _ITEMSIZE[roles.dtype]
    if l2 is None or roles.i is None or not roles.vector:
        return None
    stmt = next(s.stmt for s in model.nest_statements(nest) if s.name == roles.statement)
    broadcast, rows = set(), set()
    for r in ir.subexpressions(stmt.value):
        if not isinstance(r, ir.Ref) or not r.indices:
            continue  # a scalar
        if roles.j in set().union(*map(ir.variables, r.indices)):
            rows.add(r.tensor)  # read as vectors along the row (B): kept and packed at L2
            continue
        names = [x.name for x in r.indices if isinstance(x, ir.Var)]
        if (len(names) != len(r.indices) or len(set(names)) != len(names) or not names or names[-1] != roles.k
                or roles.i not in names or r.tensor in _written(model, nest)):
            return None
        broadcast.add(r.tensor)
    if not broadcast or broadcast & rows:
        return None  # (``A[i, k] * A[j, k]``: A's rows along j would be kept nowhere but L1)
    cols = (l2 // STREAM_SHARE) // (b.kc * size) // b.nr * b.nr
    if cols < 2 * b.nr or extents.get(roles.j, 0) <= b.nr:
        return None
    return cols, frozenset(broadcast)


def _written(model: KernelModel, nest: int) -> set[str]:
    return {s.stmt.target.tensor for s in model.nest_statements(nest)}


def parallel_loop(model: KernelModel, roles: Roles, nest: int) -> str | None:
    """The loop of the register tile's rows (else its columns) that carries no dependence of the
    nest (memory-based: a read before a later write counts), or None when both carry one.

    The nest's own loops only (``loop_classes(nests=...)``): covariance's ``i`` is the reduction of
    its first nest (``mean[j] += data[i, j]``) and a parallel loop of the product's; classed over
    the whole kernel it was taken for a reduction, and the product's rows were never shared out."""
    classes = loop_classes(model, nests=(nest,))
    for x in (roles.i, roles.j):
        if x is not None and x in classes and classes[x].parallel:
            return x
    return None


def register_tile_doc(model: KernelModel, mappings: Sequence[Mapping], arch: Architecture) -> list[dict]:
    """What compile's JSON says of each register-tiled nest: the tile, the vector unit it was shaped for, why."""
    out = []
    for m in mappings:
        extents = loop_extents(model.kernel, m.nest, {x: 1 << 20 for x in model.kernel.param_names})
        roles = find_roles(model, m.nest, extents)
        if roles is None or len(m.levels) < 4:
            continue
        rf = dict(zip(m.loops, m.levels[-1].tile))
        rows, cols = (rf.get(roles.i, 1) if roles.i else 1), rf.get(roles.j)
        if not isinstance(rows, int) or not isinstance(cols, int) or rows * cols <= 1:
            continue  # no box of accumulators at the innermost level (the original order, symm's interchange)
        tile = f"{rows}x{cols}"
        shape = register_shape(arch.vector, roles.dtype, columns=cols if roles.lanewise else None)
        out.append({"nest": m.nest, "tile": tile, "dtype": roles.dtype, "vectorised": roles.vector,
                    "vector_unit": arch.vector.to_dict() if arch.vector is not None else None,
                    "why": (shape.why + (f"; the row along {roles.j}, the target loaded and stored lane by lane"
                                         if roles.lanewise else "")) if roles.vector
                    else "not unit stride along the row loop: scalar accumulators",
                    "built": "the C chooses when built: 64-byte vectors and masked edges if __AVX512F__, "
                             "32-byte and maskload/maskstore if __AVX2__, else 16-byte vectors"})
    return out
