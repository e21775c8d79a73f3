"""A pace the test opens by hand, and a wait for what the pipeline has done."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tests.e2e.conftest import eventually


class Gate:
    """A pace that holds background writes until the test opens it (each opening lets the
    writes waiting then go)."""

    def __init__(self) -> None:
        self.waiting = 0
        self._open = asyncio.Event()

    async def wait(self) -> None:
        self.waiting += 1
        await self._open.wait()
        self._open.clear()
        self.waiting -= 1

    def open(self) -> None:
        self._open.set()


async def until(condition: Callable[[], bool]) -> None:
    """Until ``condition`` holds (10 s at most)."""

    async def check() -> bool:
        return condition()

    await eventually(check, within=10, every=0.01, what="the pipeline")
