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
"""
from __future__ import annotations

import contextlib
import multiprocessing
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from polymap.errors import PolymapError


class BudgetExceeded(PolymapError):
    """The time budget ran out: bad input in the sense of ``cli.md`` (exit 2), with the reason."""


class _Deadline(BaseException):
    """Raised by the alarm inside the watched code: a BaseException, so that no
    ``except Exception`` of an analysis mistakes it for that analysis failing."""


@dataclass(frozen=True)
class Budget:
    """Seconds a command may take (the pieces run apart take their own limits from their options)."""

    seconds: float = 300.0
    started: float = field(default_factory=time.monotonic, compare=False)
    #: the stage the command is in, for the refusal (mutable on a frozen budget)
    stage: list = field(default_factory=lambda: [""], compare=False, repr=False)

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
        self.stage[0] = what
        if self.remaining() <= 0:
            raise self.refusal(what)

    @contextlib.contextmanager
    def watch(self, what: str) -> Iterator["Budget"]:
        """Run the block under the deadline: past it, the block stops and ``BudgetExceeded`` is raised.

        Uses ``SIGALRM`` in the main thread; elsewhere (a thread of the
        caller's) only the cooperative :meth:`check` calls and :meth:`run` apply.
        """
        self.stage[0] = what
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
            raise self.refusal(self.stage[0] or what) from None
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
        seconds = min(limit, self.remaining())
        results = ctx.Queue()
        child = ctx.Process(target=_child, args=(results, fn, args, kwargs), daemon=True)
        child.start()
        try:
            status, value = results.get(timeout=seconds)
        except queue.Empty:
            status, value = "timeout", timed_out
        finally:
            if child.is_alive():
                child.kill()
            child.join()
        if status == "error":
            raise ChildFailed(value)
        if status == "timeout" and self.remaining() <= 0:
            raise self.refusal(what)
        return value


class ChildFailed(RuntimeError):
    """A piece run by :meth:`Budget.run` raised in its child (the text names the exception)."""


def _child(out: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)  # the parent's deadline is the parent's
    try:
        out.put(("ok", fn(*args, **kwargs)))
    except BaseException as exc:  # reported to the parent, which decides
        out.put(("error", f"{type(exc).__name__}: {exc}"))
