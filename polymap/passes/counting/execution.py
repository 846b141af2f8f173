"""What the generated code does with a mapping: its threads, its vector lanes and their waste.

The cost model's compute term is ``instances / (active units x ops per
cycle)`` (``mapping.md``). On an accelerator (no vector unit in the
architecture) the active units are the trip counts of the mapping's spatial
loops, as before. On a CPU (``host``: ``compute.instances`` are its cores
times its vector lanes) the active units are what the C backend makes of
the mapping, by the same rules it applies:

* **threads**: the mapping's spatial loops above the innermost level when it
  has any; otherwise OpenMP's loop (:mod:`polymap.codegen.c.parallel`): the
  outermost loop, walking levels outer to inner in their orders, that carries
  no dependence, has at least 2 x cores trips and covers at least
  :data:`MIN_WORK` instances of the statements inside it per execution
  (:func:`statement_instances`). At most the innermost level's
  instances (the cores).
* **lanes**: the innermost level's spatial loops when it has any; otherwise
  the innermost loop of the generated code (the last loop, innermost level
  first, that walks more than one tile) runs in vectors of the element type
  when it carries no dependence and the C compiler vectorises its accesses
  (:func:`vectorises`: unit-stride or invariant, reads also a constant stride,
  as conv2d's ``I[.., 2*q + s]``; ``#pragma omp simd``, or a register tile's
  vector accumulators, :mod:`polymap.codegen.c.regtile`, whose rows read from a panel count only
  where the code copies one, :func:`code_packs`); else one lane.
* **latency**: a statement that accumulates (``C[i, j] += ...``) updates each
  element in a chain, one link per iteration of a loop its target does not
  depend on (a reduction loop); the code neither splits nor reassociates it
  (``design.md``), so a link waits for the previous one (:data:`LATENCY`
  cycles). The chains in flight are the target elements the loops inside the
  innermost reduction loop walk (innermost first, while the target depends on
  them: gemm's register tile 6 x 16 = 96 elements, 12 vectors; ``k`` innermost:
  1), in vectors (:func:`chain_vectors`: a register tile's of the registers' width, a plain
  loop's as the compiler builds them, :data:`LOOP_VECTOR_BYTES`); a unit issues ``min(ops per cycle, vector
  chains / latency)`` per cycle, i.e. the compute term is multiplied by
  ``max(1, ops x latency / vector chains)``. The latency is :data:`LATENCY`
  when the accumulators live in registers (one element, or a register tile's
  box: the innermost level's loops around a reduction loop of an outer level)
  and :data:`STORE_FORWARD` more when every link loads and stores its
  element. gemm with ``k`` innermost: 8x; conv2d's original order (``s``, a
  reduction, innermost): 8x; its tiled code (``q`` innermost, 8 elements in
  memory, one vector of 8): 18x, with ``q`` tiles of 28 (4 vectors) 4.5x; a register tile: 1.
* **passes**: a box of accumulators in registers is loaded before each pass of its reduction loop
  and stored after it; the chains wait for those loads. Each pass costs :data:`PASS_CYCLES` beyond
  its steps, and :data:`LANEWISE_CYCLES` an element more when the target is loaded lane by lane
  (:func:`pass_cycles`), a factor ``1 + those cycles x ops / (vector operations a step x steps a
  pass x the steps' latency or loads factor)`` (:func:`pass_factor`): gemm's 4 x 16 box (8
  operations of 8 lanes a step) with KC 32: 1.19; the 6 x 64 register tile with KC 352: 1.003. A
  register tile's pass spans every reduction loop right around its box (conv2d's ``c, r, s``),
  walked on the loops the code prints, one trip or more (:func:`printed_loop`).
* **sync**: the team's start and barriers. With more than one thread the
  compute term gains :data:`FORK_CYCLES` for the call plus :data:`BARRIER_CYCLES`
  for each execution of the shared-out loop when the code prints loops around it
  (the executions: the product of their trips; gemm with OpenMP on ``i`` inside a
  loop of 4 ``k`` tiles has 4, each an ``omp for`` in an ``omp parallel`` with its
  barrier, 4 more barriers than with ``i`` outermost as ``omp parallel for``, and a
  printed ``k`` loop of one trip 1 more; :func:`region_barriers`), as a
  factor ``1 + those cycles / the compute cycles`` (:func:`sync_factor`). A small
  nest (conv2d 16 x 16 x 14 x 14: 0.45M instances, 0.23 ms on one core) runs
  slower on two threads than on one, as measured.
* **packs**: the panels the code copies (:mod:`polymap.passes.counting.packs`, the rule the C
  backend's packing applies): each copy writes the panel's elements, the busiest thread makes the
  copies of the loops around the copy's place (split over the threads when the place is inside the
  shared-out loop; all of them when it is outside, or once when hoisted before the nest), each
  element :data:`PACK_CYCLES` (strided writes) or :data:`PACK_UNIT_CYCLES` (consecutive); added to the compute term as cycles (:func:`pack_copies`). conv2d
  C = K = 32 at 28 x 28 with W's panel copied per ``(q, p, c)`` tile: 56 copies of 4608 elements a
  thread, +194K cycles (measured 0.07-0.18 ms slower than the same tiles with the panel hoisted).
* **waste**: the busiest unit's work over an even share, exact from tiles and
  extents. Partial vectors: the vector loop's tiles (edges included) in whole
  vectors, the remainder of each tile one iteration per issue (the scalar
  epilogue); ``N = 100`` in tiles of 32 with 8 lanes issues ``3 x 32 + 4 x 8 = 128``
  slots for 100 (x1.28). Thread share: one static chunk of tiles per thread,
  the largest against the mean; ``N = 100`` in tiles of 64 over 2 threads ->
  64 vs 50 (x1.28).

So a gemm whose innermost loop is ``j`` (unit stride, parallel) runs on
``cores x 8`` units on AVX2 f32, and the same tiles with ``k`` innermost (a
reduction) on ``cores x 1``: the model sees the 8x the code has.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from math import ceil, prod
from typing import Callable, Iterable, Iterator, Mapping as MappingT, TypeVar

import numpy as np

from polymap import ir
from polymap.pretty import expr as print_expr
from polymap.machine.arch import Architecture
from polymap.mapping.model import LevelMapping, Mapping, resolved_tile
from polymap.mapping.schedule import coordinate_map, statement_loops
from polymap.passes.counting.packs import BEFORE, Pack, copy_place, plan_packs, reads_panel, unit_writes, whole_loops
from polymap.passes.dependences.loop_classes import loop_classes
from polymap.islcheck import isl
from polymap.poly import Access, KernelModel, StatementModel, cached

Num = TypeVar("Num", int, float, np.ndarray)

#: Statement instances one worksharing loop execution (one barrier) must cover to be worth forking for.
MIN_WORK = 32768
#: Cycles from one update of an accumulator to the next dependent one (assumed, not measured: the
#: latency of a floating-point add or FMA on current x86 cores, 3-4; a chain through memory, an
#: accumulator the code loads and stores, waits longer for store-to-load forwarding, not modelled).
LATENCY = 4
#: Cycles more a link waits when its accumulator lives in memory (loaded and stored every link:
#: store-to-load forwarding, 5-7 cycles on current x86 cores; assumed, not measured).
STORE_FORWARD = 5
#: Bytes of the vectors the C compiler builds for a loop it vectorises itself (``#pragma omp simd``, or
#: at ``-O3`` without it), capped by the register width: GCC's ``-mprefer-vector-width`` under
#: ``-march=native`` on x86 (``gcc -march=native -Q --help=target``: 256 on this session's AVX-512
#: Xeon, as for every x86 tuning GCC 12 has but Xeon Phi's), whatever the registers hold: conv2d's
#: ``q`` loop is "vectorized using 32 byte vectors" and its epilogue "using 16 byte vectors"
#: (``-fopt-info-vec``). A register tile's explicit vectors (:mod:`polymap.codegen.c.regtile`) take
#: the full register width.
LOOP_VECTOR_BYTES = 32
#: Loads a core issues per cycle (vector or broadcast; two on Zen 3 and Skylake for 32-byte loads; assumed).
LOADS_PER_CYCLE = 2
#: Cycles one pass of a box of accumulators over its reduction loop costs beyond its steps: the box is
#: loaded before the loop (its chains wait for those loads: C's rows come from L2, 14+ cycles on Zen 4)
#: and stored after it, plus the loop's set-up and edge test. Measured on the session-21 Zen 4 host:
#: gemm f32 1024 with the search's 4 x 16 box (4 zmm chains) at KC 32 ran 1.16x the time of the same
#: mapping at KC 256 (single thread, CPU time, load 2.2), i.e. 24 cycles a pass of 128 zmm FMAs
#: (RESULTS.md "session 21 (blas6)").
PASS_CYCLES = 24.0
#: Cycles each element of a box costs a pass beyond :data:`PASS_CYCLES` when the box's vectors run
#: along a loop its target does not walk at unit stride: the register tile loads each accumulator lane
#: by lane before the pass and stores it lane by lane after (regtile's ``lanewise``: conv2d's
#: ``O[n, k, p, q]`` along ``k``, 16 scalar loads and stores a vector). Measured on the session-28 Xeon
#: (2.6 GHz): conv2d C = K = 32, P = Q = 14 under the 14 x 32 register tile, a pass of 9 steps against
#: the same tile's pass of 288 (bench_fidelity's pool, the busiest thread's CPU time, two runs): 0.086
#: and 0.071 ms more for 217 more passes a thread, 2.3 and 1.9 cycles an element.
LANEWISE_CYCLES = 2.0
#: Cycles a call's shared-out loop costs the team before its threads compute: waking the idle OpenMP
#: threads (``OMP_WAIT_POLICY=passive``, timing's default: they sleep in the kernel) and the processors
#: they sleep on (a virtual machine that halts an idle vCPU at once, ``guest_halt_poll_ns=0``, wakes it
#: through the hypervisor). What ``polymap calibrate`` measures on the sessions 26-29 Xeon VM, quiet
#: (1.64e5-1.81e5 cycles, ~65 us at 2.6 GHz; an empty region after 0.5 ms asleep: 54-61 us, session 29);
#: until session 28 400,000, assumed from the session-20 Zen 4 VM (design.md, "The team's start and
#: barriers"). A file's ``compute.team_start_cycles`` (calibrate's) overrides it.
FORK_CYCLES = 170_000.0
#: Cycles each further execution of the shared-out loop costs (the barrier at its end and the wake-up
#: of the sleeping thread at the next): gemm's codes on that VM, ~25 us each. Assumed as FORK_CYCLES.
BARRIER_CYCLES = 65_000.0
#: Cycles one element of a panel copy costs (:mod:`polymap.passes.counting.packs`) when the copy's
#: innermost loop writes the buffer strided (``packs.unit_writes`` false). Measured once on this
#: session's host (Xeon, 2.6 GHz, load 2) with benchmarks/pack_copy.c, conv2d's W panel as the code
#: prints it (C = K = 32, ``[k / 32][c][r][s][k % 32]`` over a c tile of 16, R = S = 3 at run time,
#: aligned_alloc'd and freed per copy, every write 128 bytes from the last): 0.28 ns an element, 0.73
#: cycles. gemm's A panels (``[i / MR][k][i % MR]``, writes MR apart) measured 0.22-0.24 ns (MR 6, 8).
PACK_CYCLES = 0.75
#: The same when the innermost loop writes consecutive elements (gemm's B panels, ``[j / NR][k][j % NR]``:
#: runs of NR, copied in vectors): 0.02 ns an element hot in L1, 0.12 ns from L2 and memory (a KC 256 x
#: 128 panel of a 1024 x 1024 B), i.e. 0.05-0.31 cycles (benchmarks/pack_copy.c, same run); the middle
#: of that range is assumed.
PACK_UNIT_CYCLES = 0.15


@dataclass(frozen=True)
class Execution:
    """How many units run a mapping's instances, and how unevenly."""

    threads: int = 1
    lanes: int = 1
    thread_loop: str | None = None
    vector_loop: str | None = None
    waste: float = 1.0  # busiest unit's work / an even share (>= 1)
    why: str = ""
    latency: float = 1.0  # issue slots lost waiting on accumulation chains (>= 1; module docstring)
    chains: int | None = None  # accumulator elements in flight (None: no accumulation chain)
    syncs: int = 0  # executions of the shared-out loop (each a barrier; 0: one thread)
    sync: float = 1.0  # the compute term's stretch by the team's start and barriers (>= 1; sync_factor)
    # those cycles themselves (team_cycles): a time, not work, so evaluate adds them to the compute term
    # unscaled on any architecture (another clock rate, calibration's compute factor)
    sync_cycles: float = 0.0
    passes: float = 1.0  # the stretch by loading and storing a box of accumulators every pass (pass_factor)
    # the busiest thread's cycles copying panels (pack_copies): a time added to the compute term as it is
    pack_cycles: float = 0.0
    packs: float = 1.0  # those cycles as a stretch of the compute term: 1 + pack_cycles / its cycles
    # (panel, elements the busiest thread copies into it) for each panel the code copies (pack_copies)
    copied: tuple[tuple[str, int], ...] = ()
    # the shared-out loop is an omp for inside an omp parallel around loops the code prints (its barriers
    # then count: region_barriers); False: one omp parallel for, or one thread
    region: bool = False

    @property
    def team(self) -> float:
        """The team's cycles the compute term adds: :attr:`sync_cycles`, none where ``sync`` is 1 (one
        thread, or a ranking that leaves the per-call cost out: ``replace(execution, sync=1.0)``)."""
        return self.sync_cycles if self.sync > 1 else 0.0

    @property
    def slowdown(self) -> float:
        """What the compute term multiplies an even, fully issued share by: waste x latency x passes x
        (sync + packs - 1), the team's and the copies' cycles both added to the compute cycles."""
        return self.waste * self.latency * self.passes * (self.sync + self.packs - 1.0)

    @property
    def units(self) -> int:
        return self.threads * self.lanes

    def to_json(self) -> dict:
        return {"threads": self.threads, "lanes": self.lanes, "thread_loop": self.thread_loop,
                "vector_loop": self.vector_loop, "waste": self.waste, "latency": self.latency,
                "chains": self.chains, "syncs": self.syncs, "sync": self.sync, "sync_cycles": self.sync_cycles,
                "passes": self.passes, "pack_cycles": self.pack_cycles, "packs": self.packs,
                "copied": [list(c) for c in self.copied], "region": self.region, "why": self.why}


def loop_coefficient(e: ir.Expr, loop: str) -> int | None:
    """The coefficient of ``loop`` in the affine subscript ``e`` (None: not affine in it).

    ``j - 1`` -> 1, ``2 * j`` -> 2, ``i + N`` -> 0, ``j * j`` -> None.
    """
    match e:
        case ir.Var(name=n):
            return 1 if n == loop else 0
        case ir.Const():
            return 0
        case ir.Neg(operand=a):
            c = loop_coefficient(a, loop)
            return None if c is None else -c
        case ir.BinOp(op="+" | "-", lhs=a, rhs=b):
            ca, cb = loop_coefficient(a, loop), loop_coefficient(b, loop)
            if ca is None or cb is None:
                return None
            return ca + cb if e.op == "+" else ca - cb
        case ir.BinOp(op="*", lhs=ir.Const(value=int() as k), rhs=b) | ir.BinOp(op="*", lhs=b, rhs=ir.Const(value=int() as k)):
            c = loop_coefficient(b, loop)
            return None if c is None else k * c
    used = any(isinstance(v, ir.Var) and v.name == loop for v in ir.subexpressions(e))
    return None if used else 0


def vectorises(stmt: ir.Assign, loop: str, *, tile: bool = False,
               packed: Callable[[ir.Ref], bool] | None = None) -> bool:
    """Does the C code run ``stmt`` in vectors along ``loop`` (the loop carrying no dependence)?
    The one rule for the C backend's ``omp simd``, a register tile's vectors and the cost model's lanes.

    Row-major: the target is invariant or unit-stride along ``loop`` (its last subscript), every read
    invariant or a constant positive stride in its last subscript only. GCC loads a constant stride in
    vectors (two loads and a permutation for conv2d's ``I[.., 2*q + s]``) and vectorises that loop at
    ``-O3`` with or without the pragma (``gcc -fopt-info-vec``: 32-byte vectors, then a 16-byte
    epilogue); a loop in a leading subscript (a column walk, a stride of a row) gathers, and is left
        to one lane, as is a negative stride (GCC reverses a stride of -1 but not of -2: kept out).
    ``O[q] += I[2*q + s] * W[s]`` along ``q``: yes; along ``s``: no (the target is invariant, a
    reduction); ``B[j, i] = A[i, j]`` along ``j``: no.

    ``tile``: the explicit vectors of a register tile (:mod:`polymap.codegen.c.regtile`), which load
    each operand that moves along ``loop`` from consecutive elements: every such read has stride 1 in
    its last subscript and none in the others (:func:`unit_stride`), or is read from a panel whose
    last, unit-stride dimension is ``loop`` (``packed(ref)``: :mod:`polymap.codegen.c.packing`,
    syrk's ``A[j, k]``). The target may move along ``loop`` in any subscript: a target that is not
    unit stride is loaded and stored lane by lane, once before and once after the reduction loops
    (conv2d's ``O[n, k, p, q]`` along ``k``). conv2d's ``I[.., 2*q + s]`` along ``q``: no (the
    tile's accumulators are scalars, where GCC's own loop over ``q`` would vectorise).
    """
    refs = [stmt.target] + [r for r in ir.subexpressions(stmt.value) if isinstance(r, ir.Ref)]
    for r in refs:
        if tile:
            if r is stmt.target or unit_stride(r, loop) or (packed is not None and packed(r)):
                continue
            return False
        coeffs = [loop_coefficient(x, loop) for x in r.indices]
        if any(c is None or c != 0 for c in coeffs[:-1]) or (coeffs and (coeffs[-1] is None or coeffs[-1] < 0)):
            return False
        if coeffs and coeffs[-1] > 1 and r is stmt.target:
            return False
    return True


def packable(ref: ir.Ref, written: Iterable[str]) -> bool:
    """May a read be copied into a panel (:mod:`polymap.codegen.c.packing`): a tensor no statement of
    the nest writes (``written``), read by distinct bare loop variables? What ``find_roles`` builds a
    register tile by (the reads it would vectorise: syrk's ``A[j, k]``, conv2d's ``W[k, c, r, s]`` along
    ``k``), a wish: whether the code copies the panel is ``plan_packs``' answer for the mapping
    (:func:`code_packs`), which the lanes count (:func:`panels_along`). Every panel is of a packable
    read, so it bounds them (``batch_execution`` plans no row's panels where it changes nothing)."""
    names = [x.name for x in ref.indices if isinstance(x, ir.Var)]
    return ref.tensor not in set(written) and len(names) == len(ref.indices) and len(set(names)) == len(names)


def box_loop(mapping: Mapping, loop: str) -> bool:
    """Is ``loop`` a loop of a register tile's box: a constant tile of at least 2 at the innermost level
    (what :mod:`polymap.codegen.c.regtile` unrolls into accumulators, and vectorises by
    ``vectorises(tile=True)``)? A whole loop there (an interchange's ``i`` of ``cov[i, j]``) is
    printed as a loop, GCC's to vectorise (the plain rule)."""
    t = mapping.levels[-1].tile[mapping.loops.index(loop)]
    return isinstance(t, int) and t >= 2


def unit_stride(ref: ir.Ref, loop: str) -> bool:
    """Is ``ref`` invariant along ``loop``, or does ``loop`` step it by one element (coefficient 1 in
    its last subscript, 0 in the others)? What a register tile's vector load needs (:func:`vectorises`)."""
    coeffs = [loop_coefficient(x, loop) for x in ref.indices]
    return all(c == 0 for c in coeffs) or (coeffs[-1] == 1 and all(c == 0 for c in coeffs[:-1]))


def scalar_share(stmts: Iterable[ir.StatementContext], loop: str, extents: MappingT[str, int],
                 lanes: int, *, tile: bool = False, panel: Callable[[ir.Ref], bool] | None = None
                 ) -> float | None:
    """How much longer than in ``lanes`` lanes the statements take when ``loop`` is the vector loop
    (>= 1), or None when no statement runs in vectors along it.

    Consecutive statements with the same loops share one innermost ``loop`` in the code; a statement
    with other loops between them separates them (one that lacks a loop runs before or after it, so
    ``init; for k { acc }; copy`` walked ``i, k, j`` has three ``j`` loops). Such a group runs in
    vectors when the compiler vectorises every one of its statements along ``loop``
    (:func:`vectorises`, the C backend's ``omp simd`` rule; with ``tile``, a register tile's box along
    ``loop``, that of its explicit vectors, with the reads ``panel`` says it loads from a panel whose
    last dimension is ``loop``: :func:`panels_along` of the panels the code copies), else one lane. Weighted by instances (the loops' extents): covariance's
    ``for i { for k { for j: cov[i, j] += data[k, i] * data[k, j] } for j: mirror cov[j, i] = ... }``
    has its N M^2 / 2 updates in vectors and only the M^2 / 2 mirror copies in one lane: x1.006 with
    8 lanes, where the whole nest in one lane would be x8. Statements without ``loop`` count as
    vectorised (they are not in the loop).
    """
    stmts = list(stmts)
    groups: list[tuple[frozenset[str], list[ir.StatementContext]]] = []
    rest = 0
    for c in stmts:
        own = frozenset(lp.var for lp in c.loops)
        if loop not in own:
            rest += prod(max(1, extents.get(x, 1)) for x in own)
            groups.append((own, []))  # runs between the loops of the others
        elif groups and groups[-1][0] == own and groups[-1][1]:
            groups[-1][1].append(c)
        else:
            groups.append((own, [c]))
    fast, slow = rest, 0
    for own, members in groups:
        n = len(members) * prod(max(1, extents.get(x, 1)) for x in own)
        # the tile's rule for the statements it holds in registers, with the reads the code packs
        # into a panel whose row is ``loop`` (conv2d's W[k, c, r, s]; regtile asks the same panels):
        # not packable, find_roles' wish, which syrk at PolyBench MINI (its j whole above the registers,
        # a triangle's bound: no panel) does not get: its tile runs in scalars, measured 1.18x slower
        # than isl's schedule where 8 lanes were counted (design.md, "The panels' lanes")
        if all(vectorises(c.stmt, loop, tile=tile and accumulates(c.stmt), packed=panel) for c in members):
            fast += n
        else:
            slow += n
    if not fast or fast == rest:
        return None
    return (fast + slow * lanes) / (fast + slow)


def panels_along(packs: MappingT[tuple[str, tuple[str, ...]], Pack], loop: str) -> Callable[[ir.Ref], bool]:
    """:func:`scalar_share`'s ``panel`` for the panels ``packs`` (:func:`code_packs`): the reads the code
    loads from a panel whose last, unit-stride dimension is ``loop`` (the rule regtile applies)."""
    return lambda ref: reads_panel(packs, ref, loop)


def accumulates(stmt: ir.Assign) -> bool:
    """``stmt`` updates its target from its own value: ``+=`` and the like, or ``C[i] = C[i] + ...``."""
    if stmt.is_reduction:
        return True
    target = stmt.target.tensor, tuple(print_expr(e) for e in stmt.target.indices)
    return any(isinstance(r, ir.Ref) and (r.tensor, tuple(print_expr(e) for e in r.indices)) == target
               for r in ir.subexpressions(stmt.value))


def target_loops(stmt: ir.Assign, loops: Iterable[str]) -> frozenset[str]:
    """The loops among ``loops`` that ``stmt``'s target depends on (a subscript not invariant along it)."""
    return frozenset(x for x in loops if any(loop_coefficient(e, x) != 0 for e in stmt.target.indices))


def chain_elements(stmts: Iterable[ir.StatementContext], walk: list[tuple[int, str, int]],
                   last: int = -1) -> int | None:
    """Accumulator elements in flight (fewest over the accumulating statements): the product of the
    trips of the loops inside the innermost reduction loop (``walk``'s order), innermost first, while
    the target depends on them; None when no statement accumulates along a loop that walks."""
    found = chains(stmts, walk, last)
    return None if found is None else found[0]


def chains(stmts: Iterable[ir.StatementContext], walk: list[tuple[int, str, int]],
           last: int) -> tuple[int, bool] | None:
    """``(elements in flight, in registers)`` of :func:`chain_elements`. In registers: one element
    (the compiler keeps an accumulator invariant along the innermost loop in a register), or every
    loop inside the reduction loop at the innermost level ``last`` and the reduction loop itself at an
    outer level (a register tile's box, :mod:`polymap.codegen.c.regtile`, whose pattern this is);
    otherwise each link loads and stores its element."""
    best: tuple[int, bool] | None = None
    for ctx in stmts:
        if not accumulates(ctx.stmt):
            continue
        own = {lp.var for lp in ctx.loops}
        deps = target_loops(ctx.stmt, own)
        n, box = 1, True
        for k, x, trips in reversed(walk):
            if x not in own:
                continue
            if x not in deps:  # the reduction loop: each of its iterations is one link of every chain
                # a box of accumulators stays in registers only around a reduction loop of an outer
                # level (regtile.match's pattern); with the reduction loop inside the innermost level
                # too, the code is plain loops and every link loads and stores its element
                here = (n, n == 1 or (box and k < last))
                best = here if best is None or here < best else best
                break
            n *= trips
            box = box and k == last
    return best


Steps = list[tuple[StatementModel, Access, isl.Set]]


def walk_steps(model: KernelModel, coords: Iterable[tuple[StatementModel, isl.Map]], loops: tuple[str, ...],
               inner: str, wave: tuple[str, ...] = ()) -> Steps:
    """``(statement, access, deltas)``: how each access's element moves from one iteration of the
    walk's innermost loop ``inner`` to the next (empty deltas: the statement does not move along it).
    ``coords``: each statement's map to the points of ``loops``; ``wave`` ``(a, b)`` with ``inner``
    = ``b``: the walk goes by diagonals, so the next point has ``a`` one smaller."""
    a = [f"a{j}" for j in range(len(loops))]
    b = [f"{a[j]} + 1" if x == inner else f"{a[j]} - 1" if wave and x == wave[0] else a[j]
         for j, x in enumerate(loops)]
    step = isl.Map(f"{{ [{', '.join(a)}] -> [{', '.join(b)}] }}")
    out = []
    for st, cm in coords:
        moved = cm.apply_range(step.align_params(cm.get_space())).apply_range(cm.reverse())
        for acc in st.accesses:
            out.append((st, acc, acc.relation.reverse().apply_range(moved).apply_range(acc.relation).deltas()))
    return out


def reduces(steps: Steps) -> bool:
    """Does an update (``A[i][j] -= ...``) keep its target from one iteration of the walk's
    innermost loop to the next (``steps``: :func:`walk_steps`)? Then every iteration waits for
    the last one's update: one accumulator in flight."""
    for st, acc, deltas in steps:
        if acc.kind == "write" and accumulates(st.context.stmt) and not deltas.is_empty():
            zero = isl.Set(f"{{ {deltas.get_tuple_name()}[{', '.join(['0'] * deltas.dim(isl.dim_type.set))}] }}")
            if deltas.is_subset(zero.align_params(deltas.get_space())):
                return True
    return False


def _rescheduled_chain(model: KernelModel, mapping: Mapping, walk: list[tuple[int, str, int]]) -> bool:
    """A mapping with a ``schedule`` walks new loops, which :func:`chains` (reading the statements' own
    loops) cannot follow. Exact, in the schedule's coordinates: does the innermost walked loop along
    which each update moves keep its target (doitgen's isl schedule ``s4 = p + s``, then constants that
    only order the statements: ``sum[p]`` along ``s4``, one accumulator, as in the original)? Every
    update, not some: a point walk that frees the main update (cholesky's ``j`` innermost: 64
    updates in flight) is not charged for a minor one's chain (its diagonal's, N^2 of N^3/6 instances)."""
    if not mapping.schedule:
        return False
    kept = None
    for st in model.statements:
        loops = statement_loops(mapping, st)
        if st.context.nest not in mapping.mapped_nests or not accumulates(st.context.stmt):
            continue
        cm = coordinate_map(model, mapping, st, loops)
        for k, inner, _ in reversed(walk):
            if inner not in loops:
                continue
            wave = mapping.levels[k].wavefront
            wave = wave if len(wave) == 2 and wave[1] == inner and wave[0] in loops else ()
            steps = walk_steps(model, [(st, cm)], loops, inner, wave)
            if all(d.is_empty() for _, _, d in steps):
                continue  # the statement stays put along it (a constant ordering the statements)
            kept = reduces(steps) and kept is not False
            break
    return bool(kept)


def ref_loops(ref: ir.Ref, loops: Iterable[str]) -> frozenset[str]:
    """The loops among ``loops`` that ``ref``'s subscripts depend on."""
    return frozenset(x for x in loops if any(loop_coefficient(e, x) != 0 for e in ref.indices))


def _step_box(ctx: ir.StatementContext, walk: list[tuple[int, str, int]]) -> tuple[dict[str, int], str, int] | None:
    """``(box, reduction loop, steps a pass)`` of an accumulating statement: the trips of the loops
    inside its innermost reduction loop (``walk``'s order) while its target depends on them, that
    reduction loop, and the steps of one pass: its trips, times, around a box of more than one element
    (a register tile, ``regtile.match``), those of the further reduction loops right around it, each
    another kernel loop; None when it does not accumulate along a loop that walks."""
    if not accumulates(ctx.stmt):
        return None
    own = {lp.var for lp in ctx.loops}
    deps = target_loops(ctx.stmt, own)
    box: dict[str, int] = {}
    rev = list(reversed(walk))
    for q, (_, x, trips) in enumerate(rev):
        if x not in own:
            continue
        if x not in deps:
            if prod(box.values()) <= 1:  # one accumulator: the compiler's register, along its own loop
                return box, x, trips
            # a register tile's pass runs over every reduction loop right around its box, each another
            # kernel loop (regtile.match: conv2d's c { r { s { box } } }); it ends at a loop the
            # target depends on, or at a second loop of a kernel loop already taken (a tile loop)
            seen, steps = {x}, trips
            for _, y, t in rev[q + 1:]:
                if y not in own:
                    continue
                if y in deps or y in seen:
                    break
                seen.add(y)
                steps *= t
            return box, x, steps
        box[x] = box.get(x, 1) * trips
    return None


def _boxes(stmts: Iterable[ir.StatementContext], walk: list[tuple[int, str, int]]
           ) -> Iterator[tuple[ir.StatementContext, dict[str, int], str, int]]:
    """``(statement, box, reduction loop, steps a pass)`` of every statement :func:`_step_box` finds."""
    for ctx in stmts:
        found = _step_box(ctx, walk)
        if found is not None:
            yield (ctx, *found)


def _issued(box: MappingT[str, int], vloop: str | None, lanes: int) -> Callable[[Iterable[str]], int]:
    """Operations a step issues over some of the box's loops: in vectors along the vector loop."""
    width = lanes if vloop in box else 1

    def issued(loops: Iterable[str]) -> int:
        return prod(ceil(box[x] / width) if x == vloop else box[x] for x in loops if x in box)
    return issued


def pass_factor(stmts: Iterable[ir.StatementContext], walk: list[tuple[int, str, int]], vloop: str | None,
                lanes: int, ops_per_cycle: float, in_registers: bool, stretch: float = 1.0) -> float:
    """The compute term's stretch by the passes of a box of accumulators in registers over its
    reduction loop: ``1 + pass_cycles x ops / (vector operations a step x steps a pass x stretch)``
    (module docstring; ``stretch``: the steps' own, the latency or loads factor, so that a pass's
    cost is added to the cycles its steps take), the largest over the accumulating statements; 1
    when the accumulators live in memory (every link loads and stores: :data:`STORE_FORWARD`). The
    passes this amortises, instances / (box elements x steps), are what a walk of the tiled loops
    counts (a test does)."""
    if not in_registers:
        return 1.0
    worst = 1.0
    for ctx, box, _, steps in _boxes(stmts, walk):
        cost = pass_cycles(ctx.stmt, box, vloop, lanes)
        worst = max(worst, 1.0 + cost * ops_per_cycle / (_issued(box, vloop, lanes)(box) * steps * stretch))
    return worst


def loads_lanewise(stmt: ir.Assign, loop: str, lanes: int) -> bool:
    """Does a register tile in vectors of ``lanes`` along ``loop`` load and store ``stmt``'s target
    lane by lane: its vectors run along a loop the target does not walk at unit stride (regtile's
    ``lanewise``, the one condition)."""
    return lanes > 1 and not unit_stride(stmt.target, loop)


def pass_cycles(stmt: ir.Assign, box: MappingT[str, int], vloop: str | None, lanes: int) -> float:
    """Cycles one pass of ``box`` costs beyond its steps: :data:`PASS_CYCLES`, and
    :data:`LANEWISE_CYCLES` an element when the box's vectors load its target lane by lane."""
    vectors = vloop is not None and box.get(vloop, 1) > 1
    return PASS_CYCLES + (LANEWISE_CYCLES * prod(box.values()) if vectors and loads_lanewise(stmt, vloop, lanes) else 0.0)


def load_factor(stmts: Iterable[ir.StatementContext], walk: list[tuple[int, str, int]], vloop: str | None,
                lanes: int, ops_per_cycle: float, in_registers: bool) -> float:
    """The compute term's stretch when a step of the innermost reduction loop loads more than the core
    issues while it computes: ``loads x ops / (LOADS_PER_CYCLE x vector operations)``, at least 1.

    A step covers the loops inside the reduction loop (the chains' box, with their trips); a read
    touches the elements its subscripts walk there, in vectors along the vector loop and one load
    (a broadcast) per element otherwise, none when it depends on no loop of the step (hoisted);
    accumulators in memory add a load per vector. gemm's 8 x 8 register tile: A 8 broadcasts + B 1
    vector for 8 FMAs: 9 x 2 / (2 x 8) = 1.125; its 6 x 16 tile: 6 + 2 for 12: 1. The largest over
    the accumulating statements."""
    worst = 1.0
    for ctx, box, reduction, _ in _boxes(stmts, walk):
        issued = _issued(box, vloop, lanes)
        vectors = issued(box)
        own = [lp.var for lp in ctx.loops]
        target = (ctx.stmt.target.tensor, tuple(print_expr(e) for e in ctx.stmt.target.indices))
        reads = {(r.tensor, tuple(print_expr(e) for e in r.indices)): r
                 for r in ir.subexpressions(ctx.stmt.value) if isinstance(r, ir.Ref)}
        loads = 0 if in_registers else vectors
        for key, r in reads.items():
            walked = ref_loops(r, own)
            if key == target or not walked & (set(box) | {reduction}):
                continue
            loads += issued(walked)
        worst = max(worst, loads * ops_per_cycle / (LOADS_PER_CYCLE * vectors))
    return worst


def latency_factor(elements: int | None, lanes: int, ops_per_cycle: float, in_registers: bool = True) -> float:
    """``max(1, ops x latency / vector chains)``: the compute term's stretch when too few chains
    are in flight to issue ``ops_per_cycle`` per cycle (None elements: no chain, 1); the latency is
    :data:`LATENCY`, plus :data:`STORE_FORWARD` for accumulators in memory (:func:`chain_vectors`:
    the chains in vectors of ``lanes``)."""
    if elements is None:
        return 1.0
    vectors = chain_vectors(elements, max(lanes, 1), in_registers)
    return max(1.0, ops_per_cycle * (LATENCY + (0 if in_registers else STORE_FORWARD)) / vectors)


def chain_vectors(elements: Num, lanes: int | np.ndarray, in_registers: Num) -> Num:
    """Vectors the accumulator elements in flight are held in. In registers, a register tile's box:
    whole vectors of the register width, its edges masked (``ceil(elements / lanes)``). In memory,
    a plain loop the C compiler vectorises: its issues (:func:`vector_issues`, in the loop's
    vectors, :data:`LOOP_VECTOR_BYTES`), each a chain of its own: conv2d's ``q`` tile of 28 is 4
    chains (3 vectors of 8, one of 4), of 16 two, of 8 one; a loop of 28 one lane wide, 28.
    Numbers or NumPy arrays (``lanes`` the width for each row: the register's or the loop's)."""
    masked = -(-elements // lanes)
    if isinstance(elements, np.ndarray) or isinstance(lanes, np.ndarray):
        return np.where(in_registers, masked, vector_issues(elements, lanes))
    return masked if in_registers else vector_issues(elements, lanes)


def team_constants(arch: Architecture | None) -> tuple[float, float]:
    """Cycles of a team's start and of a further barrier on ``arch``: the ones its file gives
    (``compute.team_start_cycles``, ``barrier_cycles``: ``polymap calibrate`` writes what it measured),
    else the assumed :data:`FORK_CYCLES` and :data:`BARRIER_CYCLES`."""
    c = None if arch is None else arch.compute
    fork = FORK_CYCLES if c is None or c.team_start_cycles is None else c.team_start_cycles
    barrier = BARRIER_CYCLES if c is None or c.barrier_cycles is None else c.barrier_cycles
    return fork, barrier


def region_barriers(syncs: Num, region: Num) -> Num:
    """Barriers a call's team passes beyond its start, for ``syncs`` executions of the shared-out loop:
    none for ``omp parallel for`` (its join is the start's); in a ``region`` (the loop is an ``omp
    for`` inside an ``omp parallel`` opened around the loops the code prints outside it,
    :mod:`polymap.codegen.c.parallel`) one per execution: each ``omp for`` ends in its own barrier and
    the region's join comes after the last, one more than the executions less one counted until
    session 29 (a region around a loop of one trip at the sizes given, a tile loop the code prints
    because the sizes are its parameters, has one barrier that was not counted at all: gemm 384^3's
    thirteen region codes against its three ``parallel for`` ones, RESULTS.md session 29). Measured
    (session 29, ``OMP_WAIT_POLICY=passive``, medians of 301 calls, the threads asleep before each):
    ``parallel for`` 43 us, the same loop as ``omp for`` in a region around 1, 2 and 4 executions
    44, 45.6 and 48.3 us quietly (load 1.8), 63 against 75, 99, 134 us at load 2."""
    return np.where(np.asarray(region, dtype=bool), syncs, 0)


def team_cycles(syncs: Num, threads: Num, arch: Architecture | None = None, *, region: Num = False) -> Num:
    """``start + barriers x barrier`` with more than one thread, else 0: what starting the team and
    its barriers (:func:`region_barriers`) cost a call (:func:`team_constants` of ``arch``). Numbers
    or NumPy arrays."""
    fork, barrier = team_constants(arch)
    out = np.where(np.asarray(threads) > 1, fork + region_barriers(syncs, region) * barrier, 0.0)
    return out if out.ndim else float(out)


def sync_factor(syncs: Num, threads: Num, instances: int, units: Num, busy: Num, ops_per_cycle: float,
                arch: Architecture | None = None, *, region: Num = False) -> Num:
    """``1 + team_cycles / compute cycles``: the compute term (``instances x busy / (units x ops)``,
    ``busy`` the waste times the latency factor) stretched by what starting the team and each
    barrier cost (:func:`team_cycles`); 1 with one thread. Numbers or NumPy arrays."""
    out = 1.0 + team_cycles(syncs, threads, arch, region=region) / np.maximum(_work(instances, units, busy, ops_per_cycle), 1e-300)
    return out if np.ndim(out) else float(out)


def _work(instances: int, units: Num, busy: Num, ops_per_cycle: float) -> Num:
    """The compute term's cycles before the team's and the copies': ``instances x busy / (units x ops)``."""
    return instances * busy / (np.maximum(units, 1) * ops_per_cycle)


def code_packs(model: KernelModel, mapping: Mapping, extents: MappingT[str, int]
               ) -> dict[tuple[str, tuple[str, ...]], Pack]:
    """The panels the code copies for ``mapping`` at ``extents``: :func:`~polymap.passes.counting.packs.plan_packs`
    with a whole loop's extent from ``extents`` (the numbers codegen prints as C text)."""
    whole = cached(model, ("execution", "whole", mapping.nest, tuple(sorted(extents.items()))),
                   lambda: {x: extents[x] for x in whole_loops(model, mapping.nest) if x in extents})
    return plan_packs(model, mapping, whole)


def pack_copies(model: KernelModel, mapping: Mapping, extents: MappingT[str, int], eff: list[dict[str, int]],
                code: list[tuple[int, str, int]], shared: tuple[int, str] | None, threads: int, *,
                packs: MappingT[tuple[str, tuple[str, ...]], Pack] | None = None) -> list[tuple[Pack, int]]:
    """The panels the code copies for ``mapping`` (``packs``, else :func:`code_packs`) and how many
    copies of each the busiest thread makes.

    The copy sits where :func:`~polymap.passes.counting.packs.copy_place` says among ``code`` (the loops
    the code prints, :func:`_walk` with ``printed``) around the first statement that has the panel's
    loops (the one the code copies for), and runs once per iteration of the loops around and at its
    place: per loop of them, the tiles of the next level it walks in all (edge tiles included:
    :func:`pieces` of ``eff``, :func:`effective_tiles`), the deepest such loop of each kernel loop
    counting. When the place is inside ``shared`` (the shared-out loop, over ``threads``), the busiest
    thread (a static schedule's first) walks the first ``ceil(trips / threads)`` tiles of each of its
    runs; outside it, or hoisted before the nest (once), the copies are serial, all the thread's."""
    stmts = model.nest_statements(mapping.nest)
    out = []
    for pack in (code_packs(model, mapping, extents) if packs is None else packs).values():
        own = next((s.loops for s in stmts if all(x in s.loops for x in pack.loops)), None)
        if own is None:
            continue
        chain = [(k, x) for k, x, _ in code if x in own]
        place = copy_place(pack, chain)
        if place is None:
            continue
        around = chain[:place + 1] if place != BEFORE else []
        deepest: dict[str, int] = {}
        for k, x in around:
            deepest[x] = max(k, deepest.get(x, k))
        copies = 1
        for x, k in deepest.items():
            tiles = [eff[j][x] for j in range(1, k + 2)]
            if shared is None or shared not in around or shared[1] != x or threads <= 1:
                copies *= sum(pieces(extents[x], tiles).values())
                continue
            ks = shared[0]  # the busiest thread's part of each run of the shared loop, then the loops inside
            t, inner = eff[ks + 1][x], [eff[j][x] for j in range(ks + 1, k + 2)]
            copies *= sum(n * sum(pieces(static_share(size, t, threads), inner).values())
                          for size, n in pieces(extents[x], [eff[j][x] for j in range(1, ks + 1)]).items())
        out.append((pack, copies))
    return out


def panel_name(pack: Pack) -> str:
    """``W[k, c, r, s]``: the read a panel holds, as reports name it."""
    return f"{pack.tensor}[{', '.join(pack.loops)}]"


def element_cycles(pack: Pack) -> float:
    """Cycles one element of ``pack``'s copy costs: :data:`PACK_UNIT_CYCLES` when the copy writes
    consecutive elements (:func:`~polymap.passes.counting.packs.unit_writes`), else :data:`PACK_CYCLES`."""
    return PACK_UNIT_CYCLES if unit_writes(pack) else PACK_CYCLES


def copy_cycles(copies: Iterable[tuple[Pack, int]]) -> float:
    """The busiest thread's cycles copying panels: elements x copies x :func:`element_cycles`."""
    return sum(int(pack.size) * n * element_cycles(pack) for pack, n in copies)


def vector_issues(size: Num, lanes: int | np.ndarray) -> Num:
    """Vector issues one run of ``size`` iterations of a loop the C compiler vectorises in ``lanes``
    lanes takes, as GCC builds the loop: whole vectors, then one vector of half the lanes for what
    is left when that many remain (its vectorised epilogue), then one issue per iteration (the
    scalar rest). ``gcc -O3 -march=native -fopt-info-vec`` on conv2d's ``q`` loop: "vectorized
    using 32 byte vectors" and "using 16 byte vectors"; 28 iterations in 8 lanes: 3 + 1 = 4
    issues, 14: 1 + 1 + 2 = 4, 16: 2. Numbers or NumPy arrays."""
    full, rest = size // lanes, size % lanes
    half = lanes // 2
    if isinstance(half, np.ndarray):
        h = np.maximum(half, 1)
        return np.where(half < 2, full + rest, full + rest // h + rest % h)
    if half < 2:
        return full + rest
    return full + rest // half + rest % half


def issue_slots(size: Num, lanes: int | np.ndarray) -> Num:
    """Lane slots one run of ``size`` iterations of a plain vectorised loop takes: whole vectors of
    the registers' ``lanes``, then the remainder one iteration per vector issue (a scalar epilogue).

    Not the loop GCC builds (:func:`vector_issues`: vectors of :data:`LOOP_VECTOR_BYTES`, then one
    of half of them): pessimistic on short runs, and kept so, because two of PolyBench's choices
    rest on it. Counted as GCC builds it, lu's interchange at its reduced sizes (N=31, runs of up to
    31 f64) ranks within 10% of isl's wavefront and replaces it (lu fell from 7.5x to 1.34x with
    that interchange in session 24); with every issue a whole register's time (8-lane vectors in
    16-lane pipes), gramschmidt's interchange doubles and isl's one-thread schedule, measured 4.9x
    slower at LARGE (18.6 s against 3.8 s, load 2.5), replaces it (docs/design.md, "Vector lanes").
    Numbers or NumPy arrays."""
    return (size // lanes + size % lanes) * lanes


def run_slots(size: Num, lanes: int, tile: bool | np.ndarray) -> Num:
    """Lane slots one run of ``size`` iterations of the vector loop takes in vectors of ``lanes``:
    in a register tile (:mod:`polymap.codegen.c.regtile`), whose edges are masked,
    ``ceil(size / lanes)`` whole vectors (28 in 16 lanes: 2 vectors, 32 slots); in a plain loop,
    :func:`issue_slots` (28: 1 vector and 12 issues, 208 slots). Numbers or NumPy arrays."""
    masked = -(-size // lanes) * lanes
    loop = issue_slots(size, lanes)
    if isinstance(tile, np.ndarray) or isinstance(size, np.ndarray):
        return np.where(tile, masked, loop)
    return masked if tile else loop


def largest_share(extent: int, tile: int) -> int:
    """Iterations of the busiest unit when tiles of ``tile`` go one to a unit (the last one partial)."""
    return min(tile, extent)


def static_share(extent: int, tile: int, threads: int) -> int:
    """Iterations of the busiest thread when ``schedule(static)`` deals the tiles of ``tile`` in
    ``threads`` chunks of ``ceil(tiles / threads)`` (the first thread's chunk is never the smaller)."""
    tiles = ceil(extent / tile)
    return min(ceil(tiles / threads) * tile, extent)


def effective_tiles(mapping: Mapping, extents: MappingT[str, int]) -> list[dict[str, int]]:
    """Every level's tile within the enclosing one (a loop left whole stays inside its parent's
    tile), plus a last entry of ones: the single iterations the innermost level walks."""
    # the backing store's tile is the whole nest (mapping.md), also where a mapping writes 1 there
    # (compile's original order walks every loop at the backing store, tile 1 below: choice.py)
    out = [{x: extents[x] for x in mapping.loops}]
    for k in range(1, len(mapping.levels)):
        out.append({x: min(t, out[-1][x]) for x, t in resolved_tile(mapping, k, extents).items()})
    out.append({x: 1 for x in mapping.loops})
    return out


def pieces(extent: int, tiles: Iterable[int]) -> dict[int, int]:
    """``{size: how many}`` of the pieces ``extent`` is cut into by nested tiles (each inside the last)."""
    out = {extent: 1}
    for t in tiles:
        nxt: dict[int, int] = {}
        for size, n in out.items():
            full, rest = divmod(size, t)
            if full:
                nxt[t] = nxt.get(t, 0) + n * full
            if rest:
                nxt[rest] = nxt.get(rest, 0) + n
        out = nxt
    return out


def tile_count(extent: Num, tiles: Iterable[Num]) -> Num:
    """How many pieces ``extent`` is cut into by nested tiles (each inside the last): the sum of
    :func:`pieces`, in arithmetic that numbers and arrays alike take (the batch form's rows). A loop
    over the tiles of ``x`` at level ``k`` runs ``tile_count(E, tiles[1..k+1])`` iterations in all over
    ``tile_count(E, tiles[1..k])`` executions: its trips per execution are their ratio (the C's rule,
    ``codegen/c/parallel.py``), fewer than the full tile's where a tile does not divide its parent's."""
    parts = [(extent, np.ones_like(extent) if isinstance(extent, np.ndarray) else 1)]  # (size, how many)
    for t in tiles:
        full = 0
        nxt = []
        for size, n in parts:
            full = full + n * (size // t)
            rest = size % t
            nxt.append((rest, n * (rest > 0)))
        parts = [(t, full)] + nxt
    return sum(n for _, n in parts)


def _walk(mapping: Mapping, eff: list[dict[str, int]], printed: bool = False) -> list[tuple[int, str, int]]:
    """``(level, loop, trips)`` of every loop that walks more than one tile, outermost first; with
    ``printed`` also those of one trip that the code prints (:func:`printed_loop`)."""
    out = []
    for k, lm in enumerate(mapping.levels):
        for x in lm.order:
            trips = ceil(eff[k][x] / eff[k + 1][x]) if eff[k + 1][x] else 0
            if trips > 1 or (printed and trips == 1 and printed_loop(mapping, k, x)):
                out.append((k, x, trips))
    return out


def printed_loop(mapping: Mapping, k: int, x: str) -> bool:
    """Does the code print level ``k``'s loop over the tiles of ``x`` whatever the sizes: the next level
    tiles ``x`` (an int tile, or the points of the innermost level) smaller than every enclosing tile
    the mapping gives it (the sizes are parameters of the code: a tile of 14 in a loop of 14 is a loop
    of one trip there)."""
    j = mapping.loops.index(x)
    inner = 1 if k == len(mapping.levels) - 1 else mapping.levels[k + 1].tile[j]
    if inner is None:
        return False
    outer = next((lm.tile[j] for lm in reversed(mapping.levels[:k + 1]) if lm.tile[j] is not None), None)
    return outer is None or outer > inner


def _around(stmts: list[ir.StatementContext]) -> Callable[[str, str], bool]:
    """``around(x, y)``: does loop ``x``, walked before ``y``, enclose it? Only where some statement has
    both: in an imperfect nest a sibling walked earlier (gramschmidt's ``i_3`` before the update's
    ``i_4``) has finished before ``y`` starts, so its trips do not start ``y`` again."""
    loops = [frozenset(lp.var for lp in s.loops) for s in stmts]
    return lambda x, y: not loops or any(x in own and y in own for own in loops)


def _executions(before: list[tuple[int, str, int]], loop: str, around: Callable[[str, str], bool],
                eff: list[dict[str, int]]) -> int:
    """How often ``loop`` starts: the product over the walked loops that enclose it of their tiles'
    count (:func:`tile_count`) at the deepest level each is walked: 7, not 2 x 4, for 14 rows in
    tiles of 8 cut into tiles of 2 (the C's executions are its distinct time points)."""
    deepest = {x: k for k, x, _ in before if around(x, loop)}
    return prod(tile_count(eff[0][x], [eff[j][x] for j in range(1, k + 2)]) for x, k in deepest.items())


def mean_trips(eff: list[dict[str, int]], k: int, x: str) -> float:
    """Level ``k``'s loop over the tiles of ``x``: its trips per execution (:func:`tile_count`)."""
    outer = tile_count(eff[0][x], [eff[j][x] for j in range(1, k + 1)])
    return tile_count(eff[0][x], [eff[j][x] for j in range(1, k + 2)]) / outer


def statement_instances(stmts: Iterable[ir.StatementContext], extents: MappingT[str, int],
                        loop: str | None = None) -> int:
    """Instances of ``stmts`` (only those inside ``loop`` when given), each statement the product of
    its own loops' extents. Not the product of the nest's loops: in an imperfect nest sibling loops
    (atax's ``j`` and ``j_2``) multiply nothing, and that product (N^2 M for atax, 8.4e9 against 8.0e6)
    made a 2100-instance ``j_2`` loop pass :data:`MIN_WORK`, so the model shared out (and charged 1900
    barriers to) a loop the C backend, counting the statements under it, runs on one thread."""
    total = 0
    for c in stmts:
        own = [lp.var for lp in c.loops]
        if loop is None or loop in own:
            total += prod(max(1, extents.get(x, 1)) for x in own)
    return total


def _statements(model: KernelModel, mapping: Mapping) -> list[ir.StatementContext]:
    return [s.context for s in model.statements if s.context.nest in mapping.mapped_nests]


def _parallel(model: KernelModel, nests: tuple[int, ...]) -> frozenset[str]:
    """Loops of ``nests`` that carry no dependence (memory-based: what the C backend may share out or
    vectorise). Only those nests' loops: a loop of the same name in another nest is another loop."""
    return cached(model, ("execution", "parallel", nests),
                  lambda: frozenset(n for n, c in loop_classes(model, nests=nests).items() if c.parallel))


def _widths(model: KernelModel, mapping: Mapping, arch: Architecture) -> tuple[int, int]:
    """``(register lanes, loop lanes)`` of the nest's widest element type: its registers' lanes (a
    register tile's vectors; the units, not capped by the compute units per core: on Zen 4 a pipe
    computes 8 f32 lanes of a 16-lane zmm register, hostinfo; the units, the throughput, are capped
    in execution) and those of the vectors the C compiler builds for a loop it vectorises
    (:data:`LOOP_VECTOR_BYTES`), in which its accumulators in memory are chains
    (:func:`chain_vectors`): 16 and 8 f32 lanes with AVX-512, 8 and 8 with AVX2."""
    if arch.vector is None:
        return 1, 1
    loop = dataclasses.replace(arch.vector, vector_bytes=min(arch.vector.vector_bytes, LOOP_VECTOR_BYTES))
    out = [(arch.vector.lanes(d.dtype), loop.lanes(d.dtype)) for ctx in _statements(model, mapping)
           if (d := model.kernel.decl(ctx.stmt.target.tensor)) is not None]
    return max(1, min((a for a, _ in out), default=1)), max(1, min((b for _, b in out), default=1))


def _spatial(mapping: Mapping, eff: list[dict[str, int]], levels: range) -> tuple[int, float, str | None]:
    """(units, waste, first loop) of the spatial loops at ``levels``: one inner tile per unit."""
    units, waste, first = 1, 1.0, None
    for k in levels:
        for x in mapping.levels[k].spatial:
            own, inner = eff[k][x], eff[k + 1][x]
            trips = ceil(own / inner) if inner else 0
            if trips <= 1:
                continue
            units *= trips
            waste *= largest_share(own, inner) * trips / own
            first = first or x
    return units, waste, first


def execution(model: KernelModel, mapping: Mapping, arch: Architecture, extents: MappingT[str, int], *,
              min_work: int = MIN_WORK) -> Execution:
    """The threads, lanes and waste the generated code has for ``mapping`` (module docstring).

    ``min_work``: the instances one execution of a shared-out loop must cover (:data:`MIN_WORK`, the C
    backend's rule); 0 where the extents are reduced sizes standing for larger ones (choice's ranking
    beyond the counting budget), since whether a fork pays is, like the team's start, a question of
    the given sizes: at gramschmidt's M=31, N=18 no loop covers MIN_WORK, and the interchange that
    runs on 2 threads at LARGE was ranked on one against isl's one-thread schedule (0.89x there)."""
    eff = effective_tiles(mapping, extents)
    last = len(mapping.levels) - 1
    if arch.vector is None:  # an accelerator: its spatial loops are its parallelism, nothing inferred
        units, waste, loop = _spatial(mapping, eff, range(len(mapping.levels)))
        units = max(1, min(units, arch.compute.instances))
        return Execution(units, 1, loop, None, waste, "spatial loops" if loop else "no spatial loop")
    cores = max(1, arch.levels[-1].instances)
    parallel = _parallel(model, mapping.mapped_nests)
    stmts = _statements(model, mapping)
    walk = _walk(mapping, eff)
    threads, twaste, tloop = _spatial(mapping, eff, range(last))
    why = []
    instances = statement_instances(stmts, extents) if stmts else prod(extents.get(x, 1) for x in mapping.loops)
    executions = 1
    around = _around(stmts)
    shared: tuple[int, str] | None = None  # (level, loop) of the shared-out loop
    if tloop is not None:  # the spatial loop is shared out once per iteration of the loops around it
        q = next((q for q, (k, x, _) in enumerate(walk) if k < last and x in mapping.levels[k].spatial), len(walk))
        executions = _executions(walk[:q], walk[q][1] if q < len(walk) else tloop, around, eff)
        shared = walk[q][:2] if q < len(walk) else None
    if tloop is None:
        for q, (k, x, trips) in enumerate(walk):
            executions = _executions(walk[:q], x, around, eff)
            # one execution must cover MIN_WORK instances of the statements inside it, and its trips per
            # execution be 2 a core (codegen's rules: the mean, where the tiles leave edges)
            if (x in parallel and trips >= 2 * cores and mean_trips(eff, k, x) >= 2 * cores
                    and statement_instances(stmts, extents, x) // executions >= min_work):
                threads = min(cores, trips)
                size = eff[k][x]
                twaste = static_share(size, eff[k + 1][x], threads) * threads / size
                tloop, shared = x, (k, x)
                why.append(f"OpenMP on {x} at {mapping.levels[k].level} ({trips} tiles over {threads} threads)")
                break
        else:
            why.append("no loop shared out: one thread")
    else:
        why.append(f"spatial {tloop}: {threads} threads")
    threads = max(1, min(threads, cores))
    code = _walk(mapping, eff, printed=True)  # a register tile follows the loops the code prints
    # the region opens around the printed loops that enclose the shared-out one (codegen's parallel.py)
    at = walk[q][:2] if tloop is not None and q < len(walk) else None
    outside = next((code[:p] for p, (k, x, _) in enumerate(code) if (k, x) == at), [])
    region = threads > 1 and any(around(x, tloop) for _, x, _ in outside)
    found = chains(stmts, code, last)
    if found is None and _rescheduled_chain(model, mapping, walk):
        found = (1, True)  # one accumulator along the innermost loop, in a register at best
    elements, registers = found if found is not None else (None, True)
    tile = registers and elements is not None and elements > 1  # a register tile's box (chains)
    width, short = _widths(model, mapping, arch)
    planned = code_packs(model, mapping, extents)  # the panels: a register tile's rows and the copies
    lanes, vwaste, vloop = _spatial(mapping, eff, range(last, last + 1))
    if vloop is not None:
        why.append(f"spatial {vloop} at {mapping.levels[last].level}: {lanes} lanes")
    elif walk:
        k, x, _ = walk[-1]
        box = tile and k == last and box_loop(mapping, x)
        scalar = (scalar_share(stmts, x, extents, width, tile=box, panel=panels_along(planned, x))
                  if width > 1 and x in parallel and stmts else None)
        if scalar is not None:
            sizes = pieces(extents[x], [eff[j][x] for j in range(1, k + 1)])
            slots = sum(n * run_slots(s, width, tile) for s, n in sizes.items())
            lanes, vloop, vwaste = width, x, slots / extents[x] * scalar
            kind = "a register tile's vectors" if tile else "vectors"
            why.append(f"{x} innermost, vectorised: {width} lanes in {kind} ({slots} slots for {extents[x]})")
            if scalar > 1:
                why.append(f"statements whose {x} loop strides run one lane: x{scalar:.3g}")
        else:
            why.append(f"{x} innermost, not vectorised: one lane")
    lanes = max(1, min(lanes, arch.compute.instances // threads))
    # chains in memory are a plain loop's, in the vectors the compiler builds for it (chain_vectors)
    chain_lanes = lanes if registers else min(lanes, short)
    latency = latency_factor(elements, chain_lanes, arch.compute.ops_per_cycle, registers)
    if latency > 1:
        where = "registers" if registers else "memory"
        why.append(f"{elements} accumulator element(s) in flight ({where}): x{latency:g} for latency")
    loads = load_factor(stmts, walk, vloop, lanes, arch.compute.ops_per_cycle, registers)
    if loads > latency:
        why.append(f"loads per step: x{loads:g}")
        latency = loads
    passes = pass_factor(stmts, code, vloop, lanes, arch.compute.ops_per_cycle, registers, latency)
    if passes > 1.005:
        why.append(f"accumulators loaded and stored every pass: x{passes:.3g}")
    syncs = executions if threads > 1 else 0
    sync = sync_factor(syncs, threads, instances, threads * lanes, twaste * vwaste * latency * passes,
                       arch.compute.ops_per_cycle, arch, region=region)
    if sync > 1:
        why.append(f"team start and {int(region_barriers(syncs, region))} barrier(s) ({syncs} execution(s) of "
                   f"the shared-out loop{', an omp for in a region: a barrier each, then the join' if region else ''}"
                   f"): x{sync:.3g}")
    copies = pack_copies(model, mapping, extents, eff, code, shared, threads, packs=planned)
    copied = copy_cycles(copies)
    for pack, n in copies:
        why.append(f"panel {panel_name(pack)} copied {n} time(s) ({pack.size} elements): "
                   f"+{int(pack.size) * n * element_cycles(pack):.3g} cycles")
    work = _work(instances, threads * lanes, twaste * vwaste * latency * passes, arch.compute.ops_per_cycle)
    packs = 1.0 + copied / max(float(work), 1e-300)
    return Execution(threads, lanes, tloop, vloop, twaste * vwaste, "; ".join(why), latency, elements, syncs, sync,
                     team_cycles(syncs, threads, arch, region=region), passes, copied, packs,
                     tuple((panel_name(pack), int(pack.size) * n) for pack, n in copies), region=region)


def batch_execution(model: KernelModel, template: Mapping, arch: Architecture, extents: MappingT[str, int],
                    eff: np.ndarray, declared: np.ndarray | None = None, *,
                    copies: bool | np.ndarray = True, team: bool = False) -> tuple[np.ndarray, ...]:
    """:func:`execution` over a batch: ``(units, slowdown)`` arrays for the rows of ``eff``
    (:attr:`Execution.slowdown`: the waste times the latency factor); ``team``: a third array, the
    team's cycles (:attr:`Execution.sync_cycles`), which the cost adds to every level's term too
    (:func:`~polymap.passes.counting.cost_model.level_term`).

    ``eff[b, k, j]`` is row ``b``'s effective tile (:func:`effective_tiles`) of ``template.loops[j]``
    at level ``k``, with a last level of ones; orders, spatial loops and statements are the
    template's. ``declared[b, k, j]``: the tile row ``b``'s mapping gives (0 or less: None, the
    enclosing tile), which says which loops of one trip the code prints (:func:`printed_loop`);
    without it, the template's tiles. The same rules as :func:`execution`, row by row (a test holds
    them equal).

    ``copies``: the rows whose panels' copies are counted (True: all). The others' slowdown leaves
    them out, a lower bound of theirs (the copies only add cycles), which the search ranks by before
    it counts the copies of the rows that may come first (``search._rank_fast``): planning each row's
    panels costs about 0.1 ms in Python, gemm's default compile 1.7 -> 2.4 s for every row.
    """
    B, n1, m = eff.shape
    last = n1 - 2
    loops = template.loops
    trips = -(-eff[:, :-1] // np.maximum(eff[:, 1:], 1))
    if declared is None:
        one = np.array([[0 if t is None else t for t in lm.tile] for lm in template.levels], dtype=np.int64)
        declared = np.broadcast_to(one, (B, n1 - 1, m))
    printed = batch_printed(declared, np.array([extents[x] for x in loops], dtype=np.int64))
    # a loop the code prints: it walks more than one tile, or one that printed_loop says the code has
    code_live = (trips > 1) | (printed & (trips == 1))
    positions = [(k, loops.index(x)) for k, lm in enumerate(template.levels) for x in lm.order]

    def spatial(levels: range) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        units, waste, any_ = np.ones(B, dtype=np.int64), np.ones(B), np.zeros(B, dtype=bool)
        for k in levels:
            for x in template.levels[k].spatial:
                j = loops.index(x)
                t, own, inner = trips[:, k, j], eff[:, k, j], eff[:, k + 1, j]
                many = t > 1
                units = np.where(many, units * t, units)
                waste = np.where(many, waste * np.minimum(inner, own) * t / own, waste)
                any_ |= many
        return units, waste, any_

    if arch.vector is None:  # an accelerator's spatial units: no OpenMP team to start
        units, waste, _ = spatial(range(last + 1))
        if team:
            return np.clip(units, 1, arch.compute.instances), waste, np.zeros(B)
        return np.clip(units, 1, arch.compute.instances), waste
    cores = max(1, arch.levels[-1].instances)
    parallel = _parallel(model, template.mapped_nests)
    stmts = _statements(model, template)
    threads, twaste, has = spatial(range(last))
    instances = statement_instances(stmts, extents) if stmts else prod(extents.get(x, 1) for x in loops)
    executions = np.ones(B, dtype=np.int64)
    chosen = has.copy()
    shared_q = np.full(B, -1)  # the shared-out loop's index in ``positions`` (-1: none)
    around = _around(stmts)

    def count(j: int, upto: int) -> np.ndarray:  # tile_count of loop j's tiles down to level ``upto``
        return tile_count(eff[:, 0, j], [np.maximum(eff[:, i, j], 1) for i in range(1, upto + 1)])

    def starts(q: int) -> np.ndarray:  # how often the loop at ``positions[q]`` starts (_executions)
        deepest = {j: k for k, j in positions[:q] if around(loops[j], loops[positions[q][1]])}
        out = np.ones(B, dtype=np.int64)
        for j, k in deepest.items():
            out = out * count(j, k + 1)
        return out

    def wrapped(q: int) -> np.ndarray:  # a loop the code prints encloses it: the region opens there
        out = np.zeros(B, dtype=bool)
        for k, j in positions[:q]:
            if around(loops[j], loops[positions[q][1]]):
                out |= code_live[:, k, j]
        return out

    region = np.zeros(B, dtype=bool)
    for q, (k, j) in enumerate(positions):
        t = trips[:, k, j]
        if loops[j] in parallel:
            mine = starts(q)
            work = statement_instances(stmts, extents, loops[j])
            many = count(j, k + 1) >= 2 * cores * count(j, k)  # trips per execution (mean_trips)
            take = ~chosen & (t > 1) & (t >= 2 * cores) & many & (work // mine >= MIN_WORK)
            p = np.minimum(cores, t)
            size, inner = eff[:, k, j], eff[:, k + 1, j]
            share = np.minimum(-(-(-(-size // inner)) // p) * inner, size)
            threads = np.where(take, p, threads)
            twaste = np.where(take, share * p / size, twaste)
            executions = np.where(take, mine, executions)
            region = np.where(take, wrapped(q), region)
            shared_q = np.where(take, q, shared_q)
            chosen |= take
    spatial_executions, reached = np.ones(B, dtype=np.int64), np.zeros(B, dtype=bool)
    spatial_q = np.full(B, -1)
    spatial_region = np.zeros(B, dtype=bool)
    for q, (k, j) in enumerate(positions):  # a spatial loop is shared out once per iteration of the loops around it
        first = ~reached & (k < last) & (loops[j] in template.levels[k].spatial) & (trips[:, k, j] > 1)
        spatial_executions = np.where(first, starts(q), spatial_executions)
        spatial_q = np.where(first, q, spatial_q)
        spatial_region = np.where(first, wrapped(q), spatial_region)
        reached |= first
    executions = np.where(has, spatial_executions, executions)
    shared_q = np.where(has, spatial_q, shared_q)
    region = np.where(has, spatial_region, region)
    threads = np.clip(threads, 1, cores)
    lanes, vwaste, explicit = spatial(range(last, last + 1))
    vidx = np.full(B, -1)  # the vector loop's position in ``loops`` (-1: none)
    for x in reversed(template.levels[last].spatial):  # the first spatial loop that walks, as _spatial
        j = loops.index(x)
        vidx = np.where(trips[:, last, j] > 1, j, vidx)
    elements, registers = np.full(B, np.inf), np.ones(B, dtype=bool)
    for ctx in stmts:
        if not accumulates(ctx.stmt):
            continue
        own = {lp.var for lp in ctx.loops}
        deps = target_loops(ctx.stmt, own)
        n, box = np.ones(B), np.ones(B, dtype=bool)
        stopped, found = np.zeros(B, dtype=bool), np.zeros(B, dtype=bool)
        inner = np.zeros(B, dtype=bool)  # the reduction loop is at the innermost level (see chains)
        for k, j in reversed(positions):
            x = loops[j]
            if x not in own:
                continue
            live = ~stopped & code_live[:, k, j]
            if x in deps:
                n = np.where(live, n * trips[:, k, j], n)
                box = np.where(live, box & (k == last), box)
            else:
                inner = np.where(live, k == last, inner)
                found |= live
                stopped |= live
        mine = (n == 1) | (box & ~inner)
        # the fewest elements win, and at equal elements registers (False < True in the tuple order)
        better = found & ((n < elements) | ((n == elements) & ~mine & registers))
        registers = np.where(better, mine, registers)
        elements = np.where(better, n, elements)
    boxed = registers & np.isfinite(elements) & (elements > 1)  # a register tile's box (chains)
    width, short = _widths(model, template, arch)
    innermost = np.full(B, -1)
    for q, (k, j) in enumerate(positions):
        innermost = np.where(trips[:, k, j] > 1, q, innermost)
    row_packs = _batch_packs(model, template, extents, declared)
    written = {c.stmt.target.tensor for c in stmts}
    for q, (k, j) in enumerate(positions):
        x = loops[j]
        if not (width > 1 and x in parallel and stmts):
            continue
        plain = scalar_share(stmts, x, extents, width)
        # a register tile's box takes the rule of its explicit vectors (vectorises(tile=True)) with
        # each row's panels, as execution
        boxed_here = boxed & (k == last and box_loop(template, x))
        boxes = np.full(B, np.nan)  # nan: no statement in vectors
        if boxed_here.any():
            # the panels plan_packs may make are packable reads: where those change nothing (gemm, whose
            # rows are unit stride or invariant along x), no row's panels need planning
            bare = scalar_share(stmts, x, extents, width, tile=True)
            same = bare == scalar_share(stmts, x, extents, width, tile=True, panel=lambda r: packable(r, written))
            boxes[boxed_here] = np.nan if bare is None else bare
            memo: dict[frozenset, float] = {}
            for b in ([] if same else np.flatnonzero(boxed_here)):
                packs = row_packs(b)[1]
                key = frozenset(v for v, p in packs.items() if p.unit_last(x))
                if key not in memo:
                    got = scalar_share(stmts, x, extents, width, tile=True, panel=panels_along(packs, x))
                    memo[key] = np.nan if got is None else got
                boxes[b] = memo[key]
        runs = np.where(boxed_here, ~np.isnan(boxes), plain is not None)
        here = ~explicit & (innermost == q) & runs
        if not here.any():
            continue
        scalar = np.where(boxed_here, np.nan_to_num(boxes, nan=1.0), plain if plain is not None else 1.0)
        sizes = np.full((B, 1), extents[x], dtype=np.int64)
        counts = np.ones((B, 1), dtype=np.int64)
        for level in range(1, k + 1):
            tile = eff[:, level, j][:, None]
            full, rest = sizes // tile, sizes % tile
            sizes = np.concatenate([np.broadcast_to(tile, sizes.shape), rest], axis=1)
            counts = np.concatenate([counts * full, counts * (rest > 0)], axis=1)
        slots = (counts * run_slots(sizes, width, boxed[:, None])).sum(axis=1)
        lanes = np.where(here, width, lanes)
        vwaste = np.where(here, slots / extents[x] * scalar, vwaste)
        vidx = np.where(here, j, vidx)
    lanes = np.maximum(1, np.minimum(lanes, arch.compute.instances // threads))
    known = np.isfinite(elements)
    vectors = chain_vectors(np.where(known, elements, 1).astype(np.int64),
                            np.where(registers, lanes, np.minimum(lanes, short)), registers)
    wait = LATENCY + np.where(registers, 0, STORE_FORWARD)
    latency = np.where(np.isfinite(elements), np.maximum(1.0, arch.compute.ops_per_cycle * wait / vectors), 1.0)
    # loads per step (load_factor) and passes (pass_factor), row by row as there
    pass_steps = []
    for ctx in stmts:
        if not accumulates(ctx.stmt):
            continue
        own = [lp.var for lp in ctx.loops]
        deps = target_loops(ctx.stmt, own)
        tb = {j: np.ones(B) for j in range(m)}
        inbox = {j: np.zeros(B, dtype=bool) for j in range(m)}
        red = np.full(B, -1)
        stopped = np.zeros(B, dtype=bool)
        for k, j in reversed(positions):
            x = loops[j]
            if x not in own:
                continue
            live = ~stopped & (trips[:, k, j] > 1)
            if x in deps:
                tb[j] = np.where(live, tb[j] * trips[:, k, j], tb[j])
                inbox[j] |= live
            else:
                red = np.where(live, j, red)
                stopped |= live
        found = red >= 0
        vin = np.zeros(B, dtype=bool)
        for j in range(m):
            vin |= inbox[j] & (vidx == j)
        w = np.where(vin, lanes, 1)

        def issued(walked: Iterable[int]) -> np.ndarray:
            out = np.ones(B)
            for j in walked:
                out = out * np.where(inbox[j], np.where(vidx == j, np.ceil(tb[j] / w), tb[j]), 1)
            return out

        ops_vectors = issued(range(m))
        target = (ctx.stmt.target.tensor, tuple(print_expr(e) for e in ctx.stmt.target.indices))
        reads = {(r.tensor, tuple(print_expr(e) for e in r.indices)): r
                 for r in ir.subexpressions(ctx.stmt.value) if isinstance(r, ir.Ref)}
        loads = np.where(registers, 0.0, ops_vectors)
        for key, r in reads.items():
            if key == target:
                continue
            walked = [loops.index(x) for x in ref_loops(r, own)]
            touched = np.zeros(B, dtype=bool)
            for j in walked:
                touched |= inbox[j] | (red == j)
            loads = loads + np.where(touched, issued(walked), 0.0)
        factor = loads * arch.compute.ops_per_cycle / (LOADS_PER_CYCLE * ops_vectors)
        latency = np.where(found, np.maximum(latency, factor), latency)
        pass_steps.append((found & registers, _batch_pass_work(ctx, positions, loops, trips, code_live, vidx, lanes)))
    passes = np.ones(B)  # after every statement's loads: a pass adds to the cycles its steps take
    for found, (work, cost) in pass_steps:
        passes = np.where(found, np.maximum(passes, 1.0 + cost * arch.compute.ops_per_cycle
                                            / (work * latency)), passes)
    busy = twaste * vwaste * latency * passes
    syncs = np.where(threads > 1, executions, 0)
    sync = sync_factor(syncs, threads, instances, threads * lanes, busy, arch.compute.ops_per_cycle, arch,
                       region=region)
    counted = np.flatnonzero(np.broadcast_to(np.asarray(copies, dtype=bool), (B,)))
    copied = _batch_copy_cycles(model, row_packs, counted, extents, eff, code_live, positions, shared_q, threads)
    packs = copied / np.maximum(_work(instances, threads * lanes, busy, arch.compute.ops_per_cycle), 1e-300)
    if team:
        return (threads * lanes, busy * (sync + packs),
                np.broadcast_to(team_cycles(syncs, threads, arch, region=region), (B,)))
    return threads * lanes, busy * (sync + packs)


def _batch_packs(model: KernelModel, template: Mapping, extents: MappingT[str, int], declared: np.ndarray
                 ) -> Callable[[int], tuple[Mapping | None, dict[tuple[str, tuple[str, ...]], Pack]]]:
    """``row(b)``: row ``b``'s mapping (the template with its ``declared`` tiles) and :func:`code_packs`,
    built when first asked, rows with the same tiles sharing one answer; no mapping (None) and no
    panels below three levels (:func:`~polymap.passes.counting.packs.plan_packs`: no level between the
    backing store and the registers)."""
    levels = template.levels
    memo: dict[bytes, tuple[Mapping | None, dict]] = {}
    level_memo: dict[tuple, LevelMapping] = {}  # rows share most of their levels' tiles

    def level(k: int, tile: tuple[int | None, ...]) -> LevelMapping:
        if (k, tile) not in level_memo:
            level_memo[(k, tile)] = dataclasses.replace(levels[k], tile=tile)
        return level_memo[(k, tile)]

    def row(b: int) -> tuple[Mapping | None, dict]:
        if len(levels) < 3:
            return None, {}
        key = declared[b].tobytes()
        if key not in memo:
            mapping = dataclasses.replace(template, levels=tuple(
                level(k, tuple(int(t) if t > 0 else None for t in declared[b, k])) for k in range(len(levels))))
            memo[key] = (mapping, code_packs(model, mapping, extents))
        return memo[key]
    return row


def _batch_copy_cycles(model: KernelModel, row_packs: Callable[[int], tuple[Mapping | None, dict]],
                       rows: Iterable[int], extents: MappingT[str, int], eff: np.ndarray, live: np.ndarray,
                       positions: list[tuple[int, int]], shared_q: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """:func:`copy_cycles` of :func:`pack_copies` for ``rows`` (0 for the others): each row's mapping
    and panels (:func:`_batch_packs`), effective tiles, the loops its code prints (``live``), its
    shared-out loop (``shared_q``, an index into ``positions``) and threads. Rows with the same tiles
    and the same walk share one answer."""
    out = np.zeros(eff.shape[0])
    memo: dict[bytes, float] = {}
    for b in rows:
        mapping, packs = row_packs(b)
        if mapping is None or not packs:
            continue
        loops = mapping.loops
        key = (id(packs).to_bytes(8, "little") + eff[b].tobytes() + live[b].tobytes()
               + bytes([int(shared_q[b]) + 1, int(threads[b])]))
        if key not in memo:
            tiles = [{x: int(eff[b, k, j]) for j, x in enumerate(loops)} for k in range(eff.shape[1])]
            code = [(k, loops[j], 0) for k, j in positions if live[b, k, j]]
            q = int(shared_q[b])
            shared = None if q < 0 else (positions[q][0], loops[positions[q][1]])
            memo[key] = copy_cycles(pack_copies(model, mapping, extents, tiles, code, shared, int(threads[b]),
                                                packs=packs))
        out[b] = memo[key]
    return out


def batch_printed(declared: np.ndarray, extents: np.ndarray) -> np.ndarray:
    """:func:`printed_loop` over a batch: ``out[b, k, j]`` for the declared tiles ``declared[b, k, j]``
    (0 or less: None). Level 0's tile as large as the loop is the loop (as the search's mappings
    write it: None)."""
    B, n, m = declared.shape
    tiles = declared.copy()
    tiles[:, 0] = np.where(tiles[:, 0] >= extents[None, :], 0, tiles[:, 0])
    out = np.zeros((B, n, m), dtype=bool)
    outer = np.zeros((B, m), dtype=np.int64)  # the nearest tile at this level or outside (0: none)
    for k in range(n):
        outer = np.where(tiles[:, k] > 0, tiles[:, k], outer)
        inner = np.ones((B, m), dtype=np.int64) if k == n - 1 else tiles[:, k + 1]
        out[:, k] = (inner > 0) & ((outer <= 0) | (outer > inner))
    return out


def _batch_pass_work(ctx: ir.StatementContext, positions: list[tuple[int, int]], loops: tuple[str, ...],
                     trips: np.ndarray, live: np.ndarray, vidx: np.ndarray, lanes: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_step_box` over a batch, on the loops the code prints (``live``): ``(the vector
    operations of a step of the box times the steps of one pass, the pass's own cycles)`` (a register
    tile's pass runs over every reduction loop right around its box, each another kernel loop;
    :func:`pass_cycles`)."""
    B = trips.shape[0]
    own = {lp.var for lp in ctx.loops}
    deps = target_loops(ctx.stmt, own)
    tb = {j: np.ones(B) for j in range(len(loops))}
    steps, box = np.ones(B), np.ones(B)
    stopped, extending, done = (np.zeros(B, dtype=bool) for _ in range(3))
    seen = np.zeros((B, len(loops)), dtype=bool)
    for k, j in reversed(positions):
        x = loops[j]
        if x not in own:
            continue
        t, here = trips[:, k, j], live[:, k, j]
        first = ~stopped & here
        if x in deps:
            tb[j] = np.where(first, tb[j] * t, tb[j])
            box = np.where(first, box * t, box)
            done |= extending & here
            continue
        more = extending & ~done & here
        done |= more & seen[:, j]
        take = more & ~seen[:, j]
        steps = np.where(first, t, np.where(take, steps * t, steps))
        seen[:, j] |= first | take
        extending |= first & (box > 1)
        stopped |= first
    vectors, elements, side = np.ones(B), np.ones(B), np.zeros(B, dtype=bool)
    for j, n in tb.items():
        vectors = vectors * np.where(vidx == j, np.ceil(n / np.where(n > 1, lanes, 1)), n)
        elements = elements * n
        # the box's vectors along a loop that loads the target lane by lane (pass_cycles' rule; its
        # lanes, the rows' own here, asked as "more than one")
        if loads_lanewise(ctx.stmt, loops[j], 2):
            side |= (vidx == j) & (n > 1) & (lanes > 1)
    return vectors * steps, PASS_CYCLES + np.where(side, LANEWISE_CYCLES * elements, 0.0)
