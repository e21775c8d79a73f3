"""The one ``async with`` over start/stop, and the one way a child process is stopped."""

from __future__ import annotations

import asyncio
import sys

import pytest

from kadmit.kube.lifecycle import Lifecycle, terminate


class Recorder(Lifecycle):
    def __init__(self, fail_start: bool = False) -> None:
        self.fail_start = fail_start
        self.calls: list[str] = []

    async def start(self) -> None:
        self.calls.append("start")
        if self.fail_start:
            raise RuntimeError("half started")

    async def stop(self) -> None:
        self.calls.append("stop")


async def test_async_with_starts_and_stops() -> None:
    thing = Recorder()
    async with thing as entered:
        assert entered is thing
        assert thing.calls == ["start"]
    assert thing.calls == ["start", "stop"]


async def test_a_failed_start_is_undone_and_its_error_goes_on() -> None:
    thing = Recorder(fail_start=True)
    with pytest.raises(RuntimeError, match="half started"):
        async with thing:
            pytest.fail("the block must not run after a failed start")
    assert thing.calls == ["start", "stop"]


async def _child(code: str) -> asyncio.subprocess.Process:
    """A Python child that prints one line once it is ready for signals, then runs ``code``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", f"import signal, sys, time\n{code}", stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    assert await asyncio.wait_for(process.stdout.readline(), 30) == b"ready\n"
    return process


async def test_terminate_ends_a_child_with_sigterm() -> None:
    process = await _child("print('ready', flush=True)\ntime.sleep(60)")
    assert await terminate(process, grace=30) is False
    assert process.returncode == -15  # SIGTERM


async def test_terminate_kills_a_child_that_ignores_sigterm() -> None:
    process = await _child(
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(60)"
    )
    assert await terminate(process, grace=0.5) is True
    assert process.returncode == -9  # SIGKILL


async def test_terminate_leaves_an_ended_child_as_it_is() -> None:
    process = await _child("print('ready', flush=True)\nsys.exit(3)")
    assert await process.wait() == 3
    assert await terminate(process, grace=30) is False
    assert process.returncode == 3
