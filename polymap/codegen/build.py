"""Build generated C into a shared library (cached) and call it on NumPy arrays.

``cc -O3 -march=native -fopenmp -shared -fPIC`` as ``cli.md`` promises the
file compiles with. Builds are cached under ``$POLYMAP_CACHE`` or
``$XDG_CACHE_HOME/polymap`` (``~/.cache/polymap``), keyed by a hash of the
source, the compiler and the flags, so tests and repeated runs compile
each kernel once::

    lib = build_c(source)                       # ~/.cache/polymap/<hash>.so
    fn = CFunction(lib, kernel)                 # ctypes, signature from the kernel
    fn(arrays, params)                          # arrays updated in place, no copies
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from polymap import ir
from polymap.userdirs import user_cache_dir
from polymap.errors import EnvironmentProblem, InputError
from polymap.tensors import numpy_dtype
from polymap.codegen.c.expr import c_name

DEFAULT_FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
SANITIZE_FLAGS = ("-O1", "-g", "-fopenmp", "-shared", "-fPIC", "-fno-omit-frame-pointer",
                  "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined")


def cache_dir() -> Path:
    """Where built libraries live (created on demand)."""
    base = os.environ.get("POLYMAP_CACHE")
    if base:
        path = Path(base)
    else:
        path = user_cache_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


def compiler() -> str:
    """The C compiler: ``$CC`` or ``cc`` (EnvironmentProblem when there is none)."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise EnvironmentProblem(f"no C compiler found ('{cc}' is not on PATH); install one or set CC")
    return cc


def build_key_text(source: str) -> str:
    """What a build is cached by: ``source`` without its leading block comment, which the compiler
    ignores (compile's header names the sizes the code was made for and the command line, while the
    function takes the sizes as arguments): a compile of the same code at other sizes, a cache hit of
    ``compile --tune`` in the same shape bucket, reuses the library instead of a second C build (~1 s)."""
    text = source.lstrip()
    if text.startswith("/*"):
        end = text.find("*/")  # C: a block comment ends at the first */
        if end >= 0:
            return text[end + 2:]
    return source


def build_c(source: str, *, flags: Sequence[str] = DEFAULT_FLAGS, name: str = "kernel") -> Path:
    """Compile ``source`` to a shared library and return its path (cached by content, its leading
    comment aside: :func:`build_key_text`)."""
    cc = compiler()
    key = hashlib.sha256("\0".join([cc, *flags, build_key_text(source)]).encode()).hexdigest()[:24]
    out = cache_dir() / f"{name}-{key}.so"
    if out.exists():
        return out
    with tempfile.TemporaryDirectory(prefix="polymap-") as tmp:
        src = Path(tmp) / f"{name}.c"
        src.write_text(source)
        lib = Path(tmp) / f"{name}.so"
        proc = subprocess.run([cc, *flags, str(src), "-o", str(lib), "-lm"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise EnvironmentProblem(
                f"the C compiler rejected the generated code for '{name}' (a polymap bug):\n"
                f"{' '.join([cc, *flags])}\n{proc.stderr.strip()}")
        # write-then-rename so that a concurrent reader never loads half a library
        tmp_out = out.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(lib, tmp_out)
        os.replace(tmp_out, out)
    return out


_CTYPES = {"f32": ctypes.c_float, "f64": ctypes.c_double, "i32": ctypes.c_int32, "i64": ctypes.c_int64}
#: C integer types of a C kernel's size arguments.
_C_INTS = {"int": ctypes.c_int, "long": ctypes.c_long, "long int": ctypes.c_long, "unsigned": ctypes.c_uint,
           "unsigned int": ctypes.c_uint, "short": ctypes.c_short, "long long": ctypes.c_longlong,
           "long long int": ctypes.c_longlong, "unsigned long": ctypes.c_ulong, "size_t": ctypes.c_size_t,
           "long unsigned int": ctypes.c_ulong}


class CFunction:
    """A kernel's C function loaded with ctypes; call it with arrays and parameter values."""

    def __init__(self, library: Path, kernel: ir.Kernel) -> None:
        self.kernel = kernel
        self.lib = ctypes.CDLL(str(library))
        self.fn = getattr(self.lib, c_name(kernel.name))
        self.tensors = tuple(d for d in kernel.decls if d.role != "local")
        if kernel.signature is None:  # cli.md's signature: tensors by pointer, then the parameters
            self.order = tuple(d.name for d in self.tensors) + kernel.param_names
            by_value = set(kernel.param_names)
        else:  # the original C function's (polymap.codegen.c.signature)
            self.order = tuple(a.name for a in kernel.signature)
            by_value = {a.name for a in kernel.signature if a.by_value}
        decls = {d.name: d for d in self.tensors}
        c_types = {a.name: a.c_type for a in kernel.signature or ()}
        self.by_value = by_value
        self.fn.argtypes = [
            (_CTYPES[decls[n].dtype] if n in decls else _C_INTS.get(c_types.get(n, "long"), ctypes.c_long))
            if n in by_value else ctypes.POINTER(_CTYPES[decls[n].dtype]) for n in self.order]
        self.fn.restype = None

    def __call__(self, arrays: Mapping[str, np.ndarray], params: Mapping[str, int]) -> None:
        """Run in place on ``arrays`` (C-contiguous, declared dtype; checked, never copied).

        The call runs on a thread of its own (ctypes lets go of the GIL), and
        that is not for speed: GNU OpenMP's thread pool belongs to the thread
        that opened the first parallel region and does not survive ``fork``.
        Opened on the main thread, it would hang every process forked from
        this one at its first parallel region (a CLI command run in-process
        after a kernel, :meth:`polymap.budget.Budget.supervise`); opened on a
        thread that ends, it ends with it. :meth:`call_here` is the call on
        this thread, for a process that never forks (the timing child);
        :class:`CallThread` runs many calls on one thread that ends after them.
        """
        args = self._arguments(arrays, params)
        failure: list[BaseException] = []

        def call() -> None:
            try:
                self.fn(*args)
            except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread below
                failure.append(exc)

        worker = threading.Thread(target=call, name=f"polymap kernel {self.kernel.name}")
        worker.start()
        worker.join()
        if failure:
            raise failure[0]

    def call_here(self, arrays: Mapping[str, np.ndarray], params: Mapping[str, int]) -> None:
        """As calling this object, on the calling thread: only in a process that never forks."""
        self.fn(*self._arguments(arrays, params))

    def _arguments(self, arrays: Mapping[str, np.ndarray], params: Mapping[str, int]) -> list:
        """The ctypes arguments, in the C function's order, after checking each array."""
        decls = {d.name: d for d in self.tensors}
        args = []
        for name in self.order:
            if name not in decls:
                args.append(int(params[name]))
                continue
            d, a = decls[name], arrays[name]
            if a.dtype != numpy_dtype(d.dtype) or not a.flags.c_contiguous or not a.flags.writeable:
                raise InputError(f"tensor '{d.name}': the C code needs a writable C-contiguous "
                                 f"{numpy_dtype(d.dtype)} array, got {a.dtype}")
            if name in self.by_value:
                args.append(a.reshape(()).item())
            else:
                args.append(a.ctypes.data_as(ctypes.POINTER(_CTYPES[d.dtype])))
        return args


class CallThread:
    """One thread for many calls of generated C code (a verification's every size), ended on leaving::

        with CallThread() as thread:
            for params in sizes:
                thread.call(fn, arrays, params)

    A thread per call (:meth:`CFunction.__call__`) opens a new OpenMP team at
    every call, while the team of the call before, whose threads spin a while
    after their work (GNU OpenMP's wait policy), still holds the cores: on two
    cores a 60 µs call took 4-24 ms, 0.25 s of a cache hit's 13 checked sizes.
    On one thread the team is opened once and reused (0.15 ms a call), and it
    still ends with the thread, before anything forks (the reason calls leave
    the main thread at all, :meth:`CFunction.__call__`).
    """

    def __enter__(self) -> "CallThread":
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="polymap kernel")
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True)  # the thread, and its OpenMP team, end here

    def call(self, fn: CFunction, arrays: Mapping[str, np.ndarray], params: Mapping[str, int]) -> None:
        """``fn(arrays, params)`` on this object's thread (its exceptions raised here)."""
        self._pool.submit(fn.call_here, arrays, params).result()


def load_kernel(source: str, kernel: ir.Kernel, *, flags: Sequence[str] = DEFAULT_FLAGS) -> CFunction:
    """Build (or reuse) ``source`` and return the callable for ``kernel``."""
    return CFunction(build_c(source, flags=flags, name=kernel.name), kernel)
