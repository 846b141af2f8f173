"""The time budget of ``cli.md`` (``--budget SECONDS``): one object, one mechanism.

Analyses that can run unboundedly long on valid input (deep nests, many
statements, parametric counts, compile's candidates) work under a
:class:`Budget` passed down with the other options. It bounds time in two
ways, both measured against the same deadline:

* :meth:`Budget.watch` around a whole command: when the deadline passes, the
  analysis stops at the next Python step (ISL calls are not interruptible, so
  the limits of :mod:`polymap.limits` keep each of them small) and the command
  refuses with exit 2 and the stage it was in;
* :meth:`Budget.run` for one piece with a smaller limit of its own (a
  candidate mapping's legality and counts, the search, symbolic counts): the
  piece runs in a forked child that is killed at ``min(limit, what is left)``.
  A piece over its own limit gives its ``timed_out`` value (the candidate is
  dropped); a piece stopped by the deadline refuses like the rest::

    budget = Budget(seconds=300)
    with budget.watch("compile"):
        budget.check("dependences")                 # cooperative check
        budget.run(count, (m,), limit=30, timed_out=None, what="counts of 'default'")
      -> BudgetExceeded: "compile: the time budget of 300 s ran out during counts of
         'default' (allow more with --budget SECONDS)"

A command of the CLI runs whole under :meth:`Budget.supervise`: in a forked
child that watches itself as above, while the parent relays its standard
error as it comes and kills it (with the pieces it started) when it has not
answered a moment after the deadline, which is what stops a single long ISL
or NumPy call that no alarm can interrupt. The stage the child was in comes
back through a page of shared memory, so the refusal names it either way.
"""
from __future__ import annotations

import codecs
import contextlib
import ctypes
import gc
import io
import mmap
import multiprocessing
import multiprocessing.connection
import os
import pickle
import select
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from polymap.errors import PolymapError


class BudgetExceeded(PolymapError):
    """The time budget ran out: bad input in the sense of ``cli.md`` (exit 2), with the reason."""


class _Deadline(BaseException):
    """Raised by the alarm inside the watched code: a BaseException, so that no
    ``except Exception`` of an analysis mistakes it for that analysis failing."""


#: Seconds the supervising parent waits past the deadline for the child's own refusal before killing it.
GRACE_SECONDS = 2.0


class Stage:
    """The stage a command is in: one page of memory shared with the processes forked after it."""

    SIZE = 1024

    def __init__(self) -> None:
        self._page = mmap.mmap(-1, self.SIZE)  # anonymous and MAP_SHARED: a forked child writes, the parent reads

    def set(self, what: str) -> None:
        data = what.encode("utf-8", "replace")[: self.SIZE - 1]
        self._page[: len(data) + 1] = data + b"\0"

    def get(self) -> str:
        raw = self._page[: self.SIZE]
        return raw[: raw.index(b"\0")].decode("utf-8", "replace") if b"\0" in raw else ""

    def __repr__(self) -> str:
        return f"Stage({self.get()!r})"


@dataclass(frozen=True)
class Budget:
    """Seconds a command may take (the pieces run apart take their own limits from their options)."""

    seconds: float = 300.0
    started: float = field(default_factory=time.monotonic, compare=False)
    #: the stage the command is in, for the refusal (mutable on a frozen budget, shared with forked children)
    stage: Stage = field(default_factory=Stage, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.seconds >= 0:
            raise ValueError(f"Budget.seconds must be >= 0, got {self.seconds!r}")

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.seconds - (time.monotonic() - self.started))

    def refusal(self, what: str) -> BudgetExceeded:
        return BudgetExceeded(f"the time budget of {self.seconds:g} s ran out during {what} "
                              f"(allow more with --budget SECONDS, or Budget(seconds=...) in Python)")

    def check(self, what: str) -> None:
        """Refuse (``BudgetExceeded``) when the deadline has passed; remember ``what`` as the stage."""
        self.stage.set(what)
        if self.remaining() <= 0:
            raise self.refusal(what)

    @contextlib.contextmanager
    def watch(self, what: str) -> Iterator["Budget"]:
        """Run the block under the deadline: past it, the block stops and ``BudgetExceeded`` is raised.

        Uses ``SIGALRM`` in the main thread; elsewhere (a thread of the
        caller's) only the cooperative :meth:`check` calls and :meth:`run` apply.
        """
        self.stage.set(what)
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
            yield self
            return

        def alarm(signum: int, frame: Any) -> None:
            # again in a second, should a finaliser or a C extension's callback swallow this one
            signal.setitimer(signal.ITIMER_REAL, 1.0)
            raise _Deadline()

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, max(self.remaining(), 1e-3))
        try:
            yield self
        except _Deadline:
            raise self.refusal(self.stage.get() or what) from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def run(self, fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None, *,
            limit: float, timed_out: Any, what: str) -> Any:
        """``fn(*args, **kwargs)`` in a forked child, killed after ``min(limit, remaining)`` seconds.

        Past ``limit``: ``timed_out``. Past the deadline: ``BudgetExceeded``.
        The child's exception comes back as :class:`ChildFailed` (its type and
        message), since ISL objects do not cross processes as exceptions do.
        """
        kwargs = kwargs or {}
        self.check(what)
        try:
            ctx = multiprocessing.get_context("fork")
        except ValueError:  # no fork on this platform: no limit but the deadline
            return fn(*args, **kwargs)
        if _no_time(limit):
            return timed_out
        seconds = min(limit, self.remaining())
        conn, child = _fork(ctx, fn, args, kwargs)
        try:
            # a child that ends without an answer (killed, crashed in C) counts as past its limit
            status, value = _answer(conn, seconds, dead=("timeout", timed_out)) or ("timeout", timed_out)
        finally:
            _end(conn, child)
        if status == "error":
            raise ChildFailed(value)
        if status == "timeout" and self.remaining() <= 0:
            raise self.refusal(what)
        return value

    def start(self, fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None, *,
              what: str, limit: float | None = None, timed_out: Any = None) -> "Pending":
        """``fn(*args, **kwargs)`` in a forked child while the caller goes on: :meth:`Pending.result`
        waits for its value (until the deadline: ``BudgetExceeded``; with ``limit``, past that many
        seconds from now: ``timed_out``, as :meth:`run`), :meth:`Pending.cancel` ends it.

        For work the caller needs only later (compile's exact reports, counted while it generates and
        verifies the code: the machine has two cores). Without fork on this platform the work runs
        when its result is asked for."""
        kwargs = kwargs or {}
        self.check(what)
        try:
            ctx = multiprocessing.get_context("fork")
        except ValueError:
            return Pending(self, what, fn, args, kwargs, None, None)
        if _no_time(limit):
            return Pending(self, what, lambda: timed_out, (), {}, None, None)
        stop = None if limit is None else time.monotonic() + limit
        return Pending(self, what, fn, args, kwargs, *_fork(ctx, fn, args, kwargs), stop=stop,
                       timed_out=timed_out)

    def run_all(self, pieces: Sequence["Piece"], *, jobs: int | None = None,
                wanted: Callable[[list[Any]], bool] | None = None,
                needed: Callable[[int, list[Any]], bool] | None = None) -> list[Any]:
        """Every piece as :meth:`run` runs it (in a forked child, within its limit), up to ``jobs`` children
        at once (default: the cores this process may use, :func:`usable_cores`); the results in the
        pieces' order.

        Each piece is what it would be alone, so the answers are those of one :meth:`run` after the
        other; only the wall-clock time differs (compile's candidates on two cores: issue 9). Past a
        piece's limit: its ``timed_out``. Past the deadline: ``BudgetExceeded``. A piece that raises
        (or whose child dies without answering): :class:`ChildFailed`, the others killed.

        With ``wanted``, the last piece is run on speculation: it starts like the others when a core is
        free, but once all the others have answered, ``wanted(their results)`` decides whether its
        answer is awaited; when not, its child is ended (or never started) and its result is None
        (compile's original order: counted beside the candidates, needed only when one of them is
        legal and counted).

        With ``needed``, ``needed(k, results)`` is asked just before piece ``k`` starts, with the results
        answered so far (None where not yet): when False, the piece is not started and its result is None
        (compile's candidates that an answered one has already beaten, whatever their counts).
        """
        jobs = usable_cores() if jobs is None else jobs
        try:
            ctx = multiprocessing.get_context("fork")
        except ValueError:
            ctx = None
        if ctx is None or jobs <= 1 or len(pieces) <= 1:
            results = []
            for k, p in enumerate(pieces[:-1] if wanted is not None else pieces):
                go = needed is None or needed(k, results + [None] * (len(pieces) - k))
                results.append(self.run(p.fn, p.args, p.kwargs, limit=p.limit, timed_out=p.timed_out, what=p.what)
                               if go else None)
            if wanted is not None and pieces:
                last = pieces[-1]
                results.append(self.run(last.fn, last.args, last.kwargs, limit=last.limit,
                                        timed_out=last.timed_out, what=last.what) if wanted(results) else None)
            return results
        results: list[Any] = [None] * len(pieces)
        waiting = list(range(len(pieces)))
        running: dict[Any, tuple[int, Any, float]] = {}  # the child's pipe -> (piece, child, when it stops)
        answered: set[int] = set()
        speculative = len(pieces) - 1 if wanted is not None else None  # None once decided
        held: Any = None  # the speculative piece's error, raised only if its answer is wanted
        try:
            while waiting or running:
                while waiting and len(running) < jobs:
                    k = waiting.pop(0)
                    piece = pieces[k]
                    self.check(piece.what)
                    if needed is not None and not needed(k, results):
                        answered.add(k)  # its result stays None
                        continue
                    if _no_time(piece.limit):
                        results[k] = piece.timed_out
                        answered.add(k)
                        continue
                    recv, child = _fork(ctx, piece.fn, piece.args, piece.kwargs or {})
                    running[recv] = (k, child, time.monotonic() + min(piece.limit, self.remaining()))
                first = min((stop for _, _, stop in running.values()), default=time.monotonic())
                ready = multiprocessing.connection.wait(list(running), max(0.0, first - time.monotonic())) \
                    if running else []
                now = time.monotonic()
                for conn in list(running):
                    k, child, stop = running[conn]
                    if conn in ready:
                        status, value = _answer(conn, 0)
                    elif now >= stop:
                        status, value = "timeout", pieces[k].timed_out
                    else:
                        continue
                    del running[conn]
                    _end(conn, child)
                    if status == "error" and k == speculative:
                        held = ChildFailed(value)
                    elif status == "error":
                        raise ChildFailed(value)
                    if status == "timeout" and self.remaining() <= 0:
                        raise self.refusal(pieces[k].what)
                    results[k] = value if status != "error" else None
                    answered.add(k)
                if speculative is not None and len(answered - {speculative}) == len(pieces) - 1:
                    if wanted(results[:-1]):
                        if held is not None:
                            raise held
                    else:
                        results[-1], held = None, None
                        waiting = [k for k in waiting if k != speculative]
                        for conn, (k, child, _) in list(running.items()):
                            if k == speculative:
                                del running[conn]
                                _end(conn, child)
                    speculative = None  # decided once
        finally:
            for conn, (_, child, _) in running.items():
                _end(conn, child)
        return results

    def supervise(self, fn: Callable[..., int], args: tuple = (), *, what: str) -> int:
        """``fn(*args)`` (a command: it prints and returns an exit status) in a forked child, killed
        ``GRACE_SECONDS`` after the deadline when it has not answered by then.

        The child's standard output is gathered and written here at its end,
        its standard error relayed as it comes (to whatever ``sys.stdout`` and
        ``sys.stderr`` are in this process: a terminal, or a test's capture);
        so the result is what running ``fn`` here would give. Past the
        deadline: ``BudgetExceeded`` naming the stage the child was in. A
        child that dies without answering (a crash in a C extension) is
        :class:`ChildFailed`, a bug.
        """
        self.stage.set(what)
        if not hasattr(os, "fork"):  # no fork on this platform: the in-process watch alone
            return fn(*args)
        err_r, err_w = os.pipe()
        res_r, res_w = os.pipe()
        isatty = _isatty(sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(err_r)
            os.close(res_r)
            _supervised_child(fn, args, err_w, res_w, isatty)
        os.close(err_w)
        os.close(res_w)
        try:
            status, out = self._relay(pid, err_r, res_r)
        except BaseException:  # KeyboardInterrupt, or a deadline: the child goes too
            _kill(pid)
            raise
        finally:
            os.close(err_r)
            os.close(res_r)
        if out:
            sys.stdout.write(out)
        return status

    def _relay(self, pid: int, err_r: int, res_r: int) -> tuple[int, str]:
        """Relay the child's standard error until it answers; refuse once the deadline and the grace have passed."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        result = bytearray()
        open_fds = [err_r, res_r]
        while open_fds:
            left = self.seconds + GRACE_SECONDS - (time.monotonic() - self.started)
            ready, _, _ = select.select(open_fds, [], [], max(0.0, left))
            if not ready:
                _kill(pid)
                raise self.refusal(self.stage.get())
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    open_fds.remove(fd)
                elif fd == err_r:
                    sys.stderr.write(decoder.decode(chunk))
                    sys.stderr.flush()
                else:
                    result += chunk
        tail = decoder.decode(b"", final=True)
        if tail:
            sys.stderr.write(tail)
        _, code = os.waitpid(pid, 0)
        if not result:
            how = (f"signal {os.WTERMSIG(code)}" if os.WIFSIGNALED(code) else f"status {os.waitstatus_to_exitcode(code)}")
            raise ChildFailed(f"the command's process ended with {how} without an answer")
        status, out = pickle.loads(bytes(result))
        return status, out


class Pending:
    """Work :meth:`Budget.start` runs in a child: its value once, then the child is gone."""

    def __init__(self, budget: Budget, what: str, fn: Callable[..., Any], args: tuple, kwargs: dict,
                 conn: Any = None, child: Any = None, *, stop: float | None = None, timed_out: Any = None) -> None:
        self._budget, self._what = budget, what
        self._fn, self._args, self._kwargs = fn, args, kwargs
        self._conn, self._child = conn, child
        self._stop, self._timed_out = stop, timed_out  # its own limit (monotonic time) and what it gives past it

    def result(self) -> Any:
        """The value (the child's exception, or its end without an answer, as :class:`ChildFailed`); past
        the deadline ``BudgetExceeded``."""
        if self._child is None:
            return self._fn(*self._args, **self._kwargs)
        seconds = self._budget.remaining()
        if self._stop is not None:
            seconds = min(seconds, self._stop - time.monotonic())
        try:
            answer = _answer(self._conn, max(seconds, 1e-3))
        finally:
            self.cancel()
        if answer is None:
            if self._stop is not None and self._budget.remaining() > 0:
                return self._timed_out
            raise self._budget.refusal(self._what)
        status, value = answer
        if status == "error":
            raise ChildFailed(value)
        return value

    def cancel(self) -> None:
        """End the child (nothing when it has answered and ended already)."""
        if self._child is not None:
            _end(self._conn, self._child)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class _Relay(io.TextIOBase):
    """The child's ``sys.stderr``: text written to the parent's pipe, a terminal if the parent's is one."""

    def __init__(self, fd: int, isatty: bool) -> None:
        self._fd, self._isatty = fd, isatty

    def write(self, text: str) -> int:
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(self._fd, data):]
        return len(text)

    def isatty(self) -> bool:
        return self._isatty

    def writable(self) -> bool:
        return True


def _supervised_child(fn: Callable[..., int], args: tuple, err_w: int, res_w: int, isatty: bool) -> None:
    """Run the command, send ``(status, standard output)`` to the parent and leave without cleanup."""
    code = 0
    try:
        sys.stdout = io.StringIO()
        sys.stderr = _Relay(err_w, isatty)
        status = fn(*args)
        data = pickle.dumps((int(status), sys.stdout.getvalue()))
        while data:
            data = data[os.write(res_w, data):]
    except BaseException:  # noqa: BLE001 - nothing may return into the parent's code; the parent reports it
        code = 70
    finally:
        os._exit(code)


def _kill(pid: int) -> None:
    """Kill and reap a supervised child (its own children die with it: :func:`_die_with_parent`)."""
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (a piece of a command that was killed)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the piece ends at its own limit
        pass


@dataclass(frozen=True)
class Piece:
    """One call for :meth:`Budget.run_all`: the arguments :meth:`Budget.run` takes."""

    fn: Callable[..., Any]
    args: tuple
    kwargs: dict | None
    limit: float
    timed_out: Any
    what: str


def _no_time(limit: float | None) -> bool:
    """Whether a piece with this limit of its own is answered ``timed_out`` without being run: "no time,
    no answer", the one rule of :meth:`Budget.run`, :meth:`Budget.start` and :meth:`Budget.run_all`.

    A limit of 0 s or less. Forked, a child that answers at once would race the parent's first poll
    (under load the parent is descheduled after the fork and finds the answer there), so the answer
    would be the scheduler's choice; not forked, it is always ``timed_out``. ``None`` (:meth:`Budget.start`
    without a limit) is all the time the deadline leaves."""
    return limit is not None and limit <= 0


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _fork(ctx: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """``fn(*args, **kwargs)`` started in a forked child (:func:`_child`): the read end of the pipe its
    answer comes on, and the child. The one fork of :meth:`Budget.run`, :meth:`Budget.start` and
    :meth:`Budget.run_all`."""
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, fn, args, kwargs), daemon=True)
    # the objects made so far out of the child's collections: its collector would walk (and so copy,
    # page by page) the whole inherited heap, where the caller goes on in the parent
    gc.freeze()
    try:
        child.start()
    finally:
        gc.unfreeze()
    send.close()  # the child's end: the pipe ends when the child does
    return recv, child


def _answer(conn: Any, seconds: float, *, dead: tuple[str, Any] = ("error", "the child ended without an answer")
            ) -> tuple[str, Any] | None:
    """The child's ``(status, value)`` within ``seconds``, ``dead`` when it ended without one, None when
    nothing came in time."""
    if not conn.poll(max(seconds, 0.0)):
        return None
    try:
        return conn.recv()
    except EOFError:
        return dead


def _end(conn: Any, child: Any) -> None:
    """Close a piece's pipe and kill and reap its child (done or not)."""
    conn.close()
    if child.is_alive():
        child.kill()
    child.join()


class ChildFailed(RuntimeError):
    """A piece run by :meth:`Budget.run` raised in its child (the text names the exception)."""


def _child(out: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)  # the parent's deadline is the parent's
    _die_with_parent()
    try:
        out.send(("ok", fn(*args, **kwargs)))
    except BaseException as exc:  # reported to the parent, which decides
        out.send(("error", f"{type(exc).__name__}: {exc}"))
