"""Where work items run: this process, local worker processes, or a Dask distributed cluster.

Before -> after::

    executor.map(evaluate_item, items)  ->  results, in completion order

The search merges results by each mapping's global index, so the answer
does not depend on the executor nor on the order results come back.
``dask.distributed`` is an optional dependency
(``pip install 'polymap[distributed]'``); it is imported only for
``--scheduler``.
"""
from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Protocol, Sequence

from polymap.budget import usable_cores
from polymap.errors import PolymapError


class Executor(Protocol):
    def map(self, fn: Callable, items: Sequence) -> Iterator: ...


def default_workers() -> int:
    """The cores this process may run on (:func:`polymap.budget.usable_cores`)."""
    return usable_cores()


@dataclass(frozen=True)
class LocalExecutor:
    """``workers`` local processes (forked, so nothing is re-imported); 1 runs in this process."""

    workers: int = 1

    def map(self, fn: Callable, items: Sequence) -> Iterator:
        if self.workers <= 1 or len(items) <= 1:
            return (fn(it) for it in items)
        return _pooled(fn, items, min(self.workers, len(items)))


def _pooled(fn: Callable, items: Sequence, workers: int) -> Iterator:
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as pool:
        yield from pool.imap_unordered(fn, items)


@dataclass(frozen=True)
class DaskExecutor:
    """Items submitted to an existing Dask distributed scheduler (``tcp://HOST:PORT``)."""

    address: str

    def map(self, fn: Callable, items: Sequence) -> Iterator:
        try:
            from dask.distributed import Client, as_completed
        except ImportError as exc:
            raise PolymapError(f"--scheduler needs dask.distributed: pip install 'polymap[distributed]' ({exc})")
        try:
            client = Client(self.address, timeout=10)
        except (OSError, TimeoutError) as exc:
            raise PolymapError(f"cannot reach the Dask scheduler at {self.address}: {exc}")
        return _completed(client, fn, items, as_completed)


def _completed(client: object, fn: Callable, items: Iterable, as_completed: Callable) -> Iterator:
    try:
        futures = client.map(fn, list(items), pure=False)
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        client.close()
