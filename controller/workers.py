"""Workers over a de-duplicating key queue, with a growing retry delay per failing key.

Every loop of the controller has the same shape: events put keys on a queue (a key waiting is
not queued twice, a key being processed is queued again once it is done), a few workers take
keys and reconcile them from the caches. A reconcile that fails is retried after a delay that
doubles for that key up to a minute (a conflict just means "look again", so it starts short),
and is forgotten after a success.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod

from kadmit.checks.workqueue import KeyQueue, ShutDown
from kadmit.controller.kube import ApiError

logger = logging.getLogger(__name__)

Key = tuple[str, str]
FIRST_RETRY = 0.5
MAX_RETRY = 60.0


async def cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel ``tasks``, wait until each has ended, and empty the list (so a restart begins afresh)."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    tasks.clear()


class KeyedReconciler(ABC):
    """Subclasses implement :meth:`reconcile`; ``what`` names the loop in logs and task names."""

    what = "object"

    def __init__(self, workers: int) -> None:
        self.queue: KeyQueue[Key] = KeyQueue()
        self._workers = workers
        self._tasks: list[asyncio.Task[None]] = []
        self._failures: dict[Key, int] = {}

    @abstractmethod
    async def reconcile(self, namespace: str, name: str) -> None: ...

    def initial_keys(self) -> list[Key]:
        """What to look at once when the workers start (everything the caches hold)."""
        return []

    async def start(self) -> None:
        self.queue = KeyQueue()  # a stopped queue stays shut: every term gets a fresh one
        for key in self.initial_keys():
            self.queue.add(key)
        for i in range(self._workers):
            self._tasks.append(asyncio.create_task(self._worker(), name=f"{self.what}-reconciler-{i}"))

    async def stop(self) -> None:
        self.queue.shutdown()
        await cancel_all(self._tasks)

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            try:
                await self.reconcile(*key)
                self._failures.pop(key, None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                delay = min(FIRST_RETRY * 2 ** (failures - 1), MAX_RETRY)
                if isinstance(exc, ApiError):
                    quiet = exc.conflict or exc.not_found
                    logger.log(
                        logging.DEBUG if quiet else logging.WARNING,
                        "reconcile of %s %s/%s: %s; retrying in %.1fs",
                        self.what,
                        *key,
                        exc,
                        delay,
                    )
                else:
                    logger.exception(
                        "reconcile of %s %s/%s failed; retrying in %.1fs", self.what, *key, delay
                    )
                self.queue.add_after(key, delay)
            finally:
                self.queue.done(key)
