"""Workers over one :class:`~kadmit.kube.workqueue.WorkQueue`: every loop of kadmit has this shape.

Events put keys on the queue; a few workers take keys and reconcile them from the caches. A
reconcile that fails is retried rate-limited for that key (a conflict just means "look again",
so the backoff starts short; a server's Retry-After is honoured), and its failures are forgotten
after a success. The controller's reconcilers, the check runner and the MultiKueue check all
run on :class:`Workers`.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Generic, TypeVar

from kadmit.kube.errors import ApiError
from kadmit.kube.informer import Handler, Informer
from kadmit.kube.objects import Obj
from kadmit.kube.workqueue import BASE_DELAY, MAX_DELAY, ShutDown, WorkQueue

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
Key = tuple[str, str]


async def cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel ``tasks``, wait until each has ended, and empty the list (so a restart begins afresh).

    A task that had already failed is not raised again here: stopping is not the place to learn it
    (each loop logs its own failure where it happens)."""
    current, tasks[:] = list(tasks), []
    for task in current:
        task.cancel()
    await asyncio.gather(*current, return_exceptions=True)


class Workers(Generic[K]):
    """``count`` tasks handing the queue's keys to ``reconcile``, one key at a time each.

    ``name`` names the loop in logs and task names. Each :meth:`start` gets a fresh queue (a
    stopped queue stays shut), so a loop can run again in a new term of leadership.
    """

    def __init__(self, name: str, reconcile: Callable[[K], Awaitable[None]], *, count: int = 1,
                 base_delay: float = BASE_DELAY, max_delay: float = MAX_DELAY) -> None:
        if count < 1:
            raise ValueError("a loop needs at least one worker")
        self.name = name
        self._reconcile = reconcile
        self._count = count
        self._delays = (base_delay, max_delay)
        self.queue: WorkQueue[K] = WorkQueue(base_delay=base_delay, max_delay=max_delay)
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def count(self) -> int:
        """How many keys are worked on at once."""
        return self._count

    async def start(self, keys: Iterable[K] = ()) -> None:
        base_delay, max_delay = self._delays
        self.queue = WorkQueue(base_delay=base_delay, max_delay=max_delay)
        for key in keys:
            self.queue.add(key)
        self._tasks = [asyncio.create_task(self._work(), name=f"{self.name}-{i}") for i in range(self._count)]

    async def stop(self) -> None:
        self.queue.shutdown()
        await cancel_all(self._tasks)

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    async def _work(self) -> None:
        queue = self.queue
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            try:
                await self._reconcile(key)
                queue.forget(key)
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                delay = queue.add_rate_limited(key, exc.retry_after or 0.0)
                quiet = exc.conflict or exc.not_found
                logger.log(logging.DEBUG if quiet else logging.WARNING, "%s %s: %s; again in %.1fs",
                           self.name, _describe_key(key), exc, delay)
            except Exception:
                delay = queue.add_rate_limited(key)
                logger.exception("%s %s failed; again in %.1fs", self.name, _describe_key(key), delay)
            finally:
                queue.done(key)


class KeyedReconciler(ABC):
    """A loop over ``(namespace, name)`` keys: subclasses implement :meth:`reconcile`."""

    what = "object"

    def __init__(self, workers: int) -> None:
        self.workers: Workers[Key] = Workers(f"{self.what}-reconciler", self._reconcile_key, count=workers)

    @property
    def queue(self) -> WorkQueue[Key]:
        return self.workers.queue

    @abstractmethod
    async def reconcile(self, namespace: str, name: str) -> None: ...

    def watch(self, informer: Informer, handler: Handler) -> Informer:
        """Call ``handler`` on each of ``informer``'s events; returns the informer, to keep."""
        informer.add_handler(handler)
        return informer

    def enqueue(self, event: str, obj: Obj, old: Obj | None) -> None:
        """A handler that queues the object's own key (its namespace and name)."""
        meta = obj["metadata"]
        self.queue.add((str(meta.get("namespace", "")), str(meta["name"])))

    def initial_keys(self) -> list[Key]:
        """What to look at once when the workers start (everything the caches hold)."""
        return []

    async def _reconcile_key(self, key: Key) -> None:
        await self.reconcile(*key)

    async def start(self) -> None:
        await self.workers.start(self.initial_keys())

    async def stop(self) -> None:
        await self.workers.stop()


def _describe_key(key: Hashable) -> str:
    if isinstance(key, tuple):
        return "/".join(str(part) for part in key if part is not None)
    return str(key)
