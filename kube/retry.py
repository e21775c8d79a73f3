"""Calls that must outlast a bad moment of the API server: retried while the failure is transient.

Start-up is where this matters: one 429, 503 or dropped connection while kadmit checks which
kinds the cluster serves must not end the process. A transient failure (``ApiError.retryable``:
no answer, 429, 500, 502, 503, 504) is retried with a doubling, jittered delay — the server's
Retry-After when it gives one; anything else (404, 403, 422, ...) is an answer, and is raised.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kadmit.kube.client import Client
from kadmit.kube.errors import ApiError
from kadmit.kube.resources import Resource

logger = logging.getLogger(__name__)

T = TypeVar("T")


async def retrying(operation: Callable[[], Awaitable[T]], *, what: str, first_delay: float = 0.5,
                   max_delay: float = 30.0, attempts: int | None = None,
                   unreachable_attempts: int | None = None) -> T:
    """``await operation()`` until it succeeds or fails for good (``attempts`` None: no limit).

    ``unreachable_attempts`` bounds the tries while nothing answers at all, which is more often a
    wrong address than a bad moment (the server answering 503 is certainly a bad moment).
    """
    delay = first_delay
    tried = unanswered = 0
    while True:
        tried += 1
        try:
            return await operation()
        except ApiError as exc:
            unanswered = unanswered + 1 if exc.status == 0 else 0
            if not exc.retryable or (attempts is not None and tried >= attempts) or (
                    unreachable_attempts is not None and unanswered >= unreachable_attempts):
                raise
            wait = exc.retry_after if exc.retry_after is not None else delay * (0.8 + 0.4 * random.random())
            logger.warning("%s: %s; trying again in %.1fs", what, exc, wait)
            await asyncio.sleep(wait)
            delay = min(delay * 2, max_delay)


async def served(client: Client, resource: Resource, *, attempts: int | None = 8) -> bool:
    """Whether the cluster serves ``resource``, asked through a bad minute (about one, by default;
    a few seconds when nothing answers at all)."""
    return await retrying(lambda: client.served(resource),
                          what=f"asking whether the cluster serves {resource}", attempts=attempts,
                          unreachable_attempts=4)
