"""Starting and stopping what runs beside the API server: background tasks, and ``async with``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Self

log = logging.getLogger(__name__)


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel ``tasks`` (None for one never started) and return once every one has ended.

    Nothing a task raises on its way out stops the others from being waited for; what is not a
    cancellation is logged, since no caller is left to see it.
    """
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    outcomes = await asyncio.gather(*running, return_exceptions=True)
    for task, outcome in zip(running, outcomes, strict=True):
        if isinstance(outcome, Exception):
            log.warning("task %s ended with %r", task.get_name(), outcome)


class Lifecycle:
    """Something with ``start`` and ``stop`` that also runs as ``async with thing:``."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
