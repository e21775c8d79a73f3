"""Starting and stopping what kadmit runs beside its loops: ``async with``, and child processes.

:class:`Lifecycle` is the one ``async with`` of a thing that has ``start`` and ``stop``: a start
that fails part-way is undone by ``stop`` before the error goes on, so a half-started thing
never outlives its block. :func:`terminate` is the one way a child process is stopped: SIGTERM,
then SIGKILL once a grace period has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Self


class Lifecycle:
    """Something with ``start`` and ``stop`` that also runs as ``async with thing:``.

    ``stop`` must be safe to call after a start that failed part-way (it undoes what was done).
    """

    async def start(self) -> object:
        raise NotImplementedError

    async def stop(self) -> object:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def terminate(process: asyncio.subprocess.Process, grace: float) -> bool:
    """SIGTERM, and SIGKILL if ``process`` has not ended ``grace`` seconds later; whether it had
    to be killed. A process that has already ended is left as it is."""
    if process.returncode is not None:
        return False
    with contextlib.suppress(ProcessLookupError):  # it may have ended a moment ago
        process.terminate()
    try:
        async with asyncio.timeout(grace):
            await process.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        return True
    return False
