"""Tensors as NumPy arrays: dtypes, shapes, validation, ``.npz`` files, random data.

Everything that turns a kernel's declarations into concrete arrays lives
here, so that ``run``, ``compile --verify`` and the tests agree on what a
valid input is::

    in A[M, K] : f32   with M=4, K=3   ->   np.ndarray, shape (4, 3), dtype float32
"""
from __future__ import annotations

import io
import mmap
import tokenize
import zipfile
import zlib
from pathlib import Path
from typing import Mapping

import numpy as np

from polymap import ir
from polymap.errors import Diagnostic, InputError
from polymap.evaluate import eval_int
from polymap.limits import Limits, read_limited

_NUMPY_DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}
#: Roles whose arrays the caller gives.
INPUT_ROLES = ("in", "inout")
#: Roles whose arrays a run gives back.
OUTPUT_ROLES = ("out", "inout")


def numpy_dtype(dtype: str) -> np.dtype:
    """``'f32'`` -> ``float32``, ``'f64'`` -> ``float64``, ``'i32'``, ``'i64'``."""
    try:
        return np.dtype(_NUMPY_DTYPES[dtype])
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r} (expected one of {', '.join(ir.DTYPES)})") from None


def dtype_name(dtype: np.dtype) -> str:
    """The ``.loop`` name of a NumPy dtype (``float32`` -> ``'f32'``), or NumPy's own name."""
    for name, t in _NUMPY_DTYPES.items():
        if np.dtype(t) == dtype:
            return name
    return str(dtype)


def shape_of(decl: ir.Decl, params: Mapping[str, int]) -> tuple[int, ...]:
    """The concrete shape of a declaration (``()`` for a scalar)."""
    shape = tuple(eval_int(e, params) for e in decl.shape)
    if any(n < 0 for n in shape):
        raise InputError(_diag(
            f"tensor '{decl.name}' gets the negative shape {shape} with {_show(params)}", decl))
    return shape


def io_tensors(kernel: ir.Kernel) -> tuple[ir.Decl, ...]:
    """The tensors a caller must give (``in`` and ``inout``), in declaration order."""
    return tuple(d for d in kernel.decls if d.role in INPUT_ROLES)


def output_tensors(kernel: ir.Kernel) -> tuple[ir.Decl, ...]:
    """The tensors a run gives back (``out`` and ``inout``), in declaration order."""
    return tuple(d for d in kernel.decls if d.role in OUTPUT_ROLES)


#: :func:`allocate`'s ``staggered`` placement: the ``k``-th declared tensor starts ``k * STAGGER_BYTES``
#: (mod ``PAGE_BYTES``) past a page boundary. 1088 = 17 cache lines: distinct 4 KiB offsets and L1 sets
#: for the first 60 tensors, so that no two of a kernel's arrays alias in the low 12 address bits.
STAGGER_BYTES = 1088
PAGE_BYTES = 4096
#: staggered arrays start at this boundary (plus their offset), on transparent huge pages
HUGE_PAGE_BYTES = 2 << 20


def allocate(kernel: ir.Kernel, params: Mapping[str, int], *, staggered: bool = False) -> dict[str, np.ndarray]:
    """A zero-filled array of the declared shape and dtype for every tensor.

    Sizes come from the user (``-D N=10**12``): an array NumPy cannot hold
    is an :class:`InputError` at the declaration, naming its shape.

    ``staggered`` places the arrays for timing (:mod:`polymap.codegen.timing`):
    NumPy's own placement depends on the allocator's history, and puts arrays
    of a MiB or more at the same offset in a page (``mmap`` plus malloc's
    header), where a load and a store of two arrays 4 KiB apart collide
    (4K aliasing); one code timed twice in one process ran 15% apart with it
    (docs/design.md, "Timing"). Staggered, every array has the same offset
    from a page boundary in every run and for every candidate
    (:data:`STAGGER_BYTES`), and its pages are touched (zeroed) here, not at
    the first timed call.
    """
    out: dict[str, np.ndarray] = {}
    for k, d in enumerate(kernel.decls):
        shape, dtype = shape_of(d, params), numpy_dtype(d.dtype)
        try:
            out[d.name] = _staggered(shape, dtype, k * STAGGER_BYTES % PAGE_BYTES) if staggered \
                else np.zeros(shape, dtype)
        except (ValueError, MemoryError) as exc:
            raise InputError(_diag(f"tensor '{d.name}' of shape {_shape(shape)} with {_show(params)} "
                                   f"does not fit in memory ({exc})", d)) from None
    return out


def _staggered(shape: tuple[int, ...], dtype: np.dtype, offset: int) -> np.ndarray:
    """A zeroed C-contiguous array whose data starts ``offset`` bytes past a boundary of
    :data:`HUGE_PAGE_BYTES`, on transparent huge pages where the system gives them.

    Huge pages make the placement physical too: with 4 KiB pages, the frames the kernel hands out decide
    which sets of a physically indexed cache (L2: 2 MiB, 16-way, sets picked by address bits 6-16)
    a MiB-sized array falls into, differently in every allocation; two copies of gemm 512's arrays timed
    side by side in one process ran 20% apart with the same code (docs/design.md, "Timing").
    """
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = -(-(nbytes + offset) // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
    region = mmap.mmap(-1, size + HUGE_PAGE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    raw = np.frombuffer(region, np.uint8)  # the array keeps the mapping alive (its base)
    start = (-raw.ctypes.data) % HUGE_PAGE_BYTES
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            region.madvise(mmap.MADV_HUGEPAGE, start, size)
        except OSError:  # no transparent huge pages here: the 4 KiB offsets still hold
            pass
    raw[start:start + size].fill(0)  # written, not untouched zero pages: every page is faulted in here
    return raw[start + offset:start + offset + nbytes].view(dtype).reshape(shape)


def validate_inputs(kernel: ir.Kernel, arrays: Mapping[str, np.ndarray], params: Mapping[str, int],
                    *, source_name: str = "<arrays>", allow_extra: bool = False) -> None:
    """Check that ``arrays`` holds exactly the ``in``/``inout`` tensors, well shaped and typed.

    Every problem is reported together in one :class:`InputError` that names
    the tensor, the expected and the given shape/dtype. Arrays for other
    names are an error too, unless ``allow_extra``.
    """
    diags: list[Diagnostic] = []
    for d in io_tensors(kernel):
        want_shape, want_dtype = shape_of(d, params), numpy_dtype(d.dtype)
        expected = f"shape {_shape(want_shape)} and dtype {d.dtype} ({want_dtype})"
        if d.name not in arrays:
            diags.append(_diag(f"{source_name}: no array for {d.role} tensor '{d.name}' "
                               f"(expected {expected})", d))
            continue
        a = np.asarray(arrays[d.name])
        if a.shape != want_shape or a.dtype != want_dtype:
            wrong = " and ".join(w for w, bad in (("shape", a.shape != want_shape),
                                                  ("dtype", a.dtype != want_dtype)) if bad)
            diags.append(_diag(
                f"{source_name}: array '{d.name}' has the wrong {wrong}: expected {expected}, "
                f"given shape {_shape(a.shape)} and dtype {dtype_name(a.dtype)} ({a.dtype})", d))
    known = {d.name for d in io_tensors(kernel)}
    extra = sorted(set(arrays) - known)
    if extra and not allow_extra:
        wanted = ", ".join(sorted(known)) or "none"
        diags.append(Diagnostic(
            f"{source_name}: unexpected array(s) {', '.join(repr(x) for x in extra)}: kernel "
            f"'{kernel.name}' takes only its in/inout tensors ({wanted})"))
    if diags:
        raise InputError(diags)


# What NumPy's reader raises on a damaged archive or member (its format parser tokenizes the
# header; zipfile and zlib read the members): each of them means the file, not polymap, is bad.
_DAMAGED = (ValueError, EOFError, KeyError, SyntaxError, tokenize.TokenError, zipfile.BadZipFile, zlib.error, OSError)


#: What NumPy writes (``savez``, ``savez_compressed``) and ``zipfile`` can read; any other
#: method makes ``zipfile`` raise ``NotImplementedError`` when a member is opened.
_ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
#: General-purpose flags with which ``zipfile`` refuses to open a member (RuntimeError, NotImplementedError).
_ZIP_FLAGS = {0x1: "is encrypted", 0x20: "is compressed patched data", 0x40: "uses strong encryption"}


def _check_archive(path: str | Path, raw: bytes) -> None:
    """Refuse, before NumPy opens any member, an archive whose members ``zipfile`` cannot read.

    ``np.load`` opens members lazily, and ``zipfile`` answers a member with
    another compression method (a damaged method field, or bzip2 and lzma,
    which NumPy never writes), a version it does not know or flags it does
    not implement with ``NotImplementedError``, and an encrypted one with
    ``RuntimeError``: none says "damaged file", so they are recognised here
    from the central directory instead.
    """
    if not raw.startswith(b"PK"):
        return  # not a zip (a .npy, or garbage): np.load says which
    try:
        members = zipfile.ZipFile(io.BytesIO(raw)).infolist()
    except (*_DAMAGED, NotImplementedError) as exc:  # NotImplementedError: "zip file version 11.9"
        raise InputError(f"{path}: not a valid .npz archive ({type(exc).__name__}: {exc})") from None
    for m in members:
        for bit, what in _ZIP_FLAGS.items():
            if m.flag_bits & bit:
                raise InputError(f"{path}: not a valid .npz archive (member {m.filename!r} {what})")
        if m.compress_type not in _ZIP_METHODS:
            raise InputError(f"{path}: not a valid .npz archive (member {m.filename!r} uses compression method "
                             f"{m.compress_type}; NumPy's archives use {' or '.join(_ZIP_METHODS.values())})")


def load_npz(path: str | Path, *, limits: Limits | None = None) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file, by name (``InputError`` when unreadable or too large)."""
    limits = limits if limits is not None else Limits()
    try:
        raw = read_limited(path, limits=limits, what=".npz file", limit_name="npz_bytes")
        _check_archive(path, raw)
        data = np.load(io.BytesIO(raw), allow_pickle=False)
    except OSError as exc:
        raise InputError(f"{path}: cannot read arrays: {exc.strerror or exc}") from None
    except _DAMAGED as exc:
        raise InputError(f"{path}: not a valid .npz archive ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise InputError(f"{path}: not an .npz archive (a single .npy array?)")
    try:
        with data:
            return {name: data[name] for name in data.files}
    except _DAMAGED as exc:
        raise InputError(f"{path}: not a valid .npz archive ({type(exc).__name__}: {exc})") from None


def save_npz(path: str | Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to exactly ``path`` (NumPy would append ``.npz`` to a bare name)."""
    try:
        with open(path, "wb") as f:
            np.savez(f, **dict(arrays))
    except OSError as exc:
        raise InputError(f"{path}: cannot write arrays: {exc.strerror or exc}") from None


def random_inputs(kernel: ir.Kernel, params: Mapping[str, int], *, seed: int = 0,
                  well_conditioned: bool = False) -> dict[str, np.ndarray]:
    """Random arrays for every ``in``/``inout`` tensor, reproducible from ``seed``.

    Floats are uniform in [0.5, 1.5) (no cancellation to zero, no huge
    quotients); integers are in [1, 5) (never a zero divisor). With
    ``well_conditioned``, every square 2-D tensor becomes symmetric and
    strictly diagonally dominant with a positive diagonal, hence symmetric
    positive definite: LU, Cholesky and triangular solves stay stable.
    """
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for d in io_tensors(kernel):
        shape, dt = shape_of(d, params), numpy_dtype(d.dtype)
        if np.issubdtype(dt, np.integer):
            a = rng.integers(1, 5, size=shape).astype(np.float64)
        else:
            a = rng.uniform(0.5, 1.5, size=shape)
        if well_conditioned and len(shape) == 2 and shape[0] == shape[1]:
            a = _spd(a)
        out[d.name] = np.asarray(a).astype(dt)
    return out


def _spd(a: np.ndarray) -> np.ndarray:
    """Symmetrise ``a`` and add to the diagonal more than any off-diagonal row sum."""
    sym = (a + a.T) / 2
    if np.issubdtype(a.dtype, np.floating) and np.all(a == np.round(a)):
        sym = np.ceil(sym)  # integer data stays integral
    off = np.abs(sym).sum(axis=1) - np.abs(np.diag(sym))
    return sym + np.diag(off + sym.shape[0] + 1.0)


def _diag(message: str, decl: ir.Decl) -> Diagnostic:
    loc = decl.loc if decl.loc.line > 0 else None
    return Diagnostic(message, loc)


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"


def _show(params: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "no parameters"
