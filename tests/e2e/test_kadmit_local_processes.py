"""``kadmit local``'s two processes: the API server is a child of its own (``python -m
kadmit.localcluster``); a dead child is reported in one line (exit 1); the child never outlives
``kadmit local``, not even one killed with SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.e2e.test_kadmit_local import COMMAND

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie nobody has reaped yet (an orphan's fate here)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


async def until_gone(pid: int, within: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not gone(pid):
        assert asyncio.get_running_loop().time() < deadline, f"process {pid} is still running"
        await asyncio.sleep(0.05)


@asynccontextmanager
async def kadmit_local(*args: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    """``kadmit local ARGS`` once ready, and the pid of its API server."""
    proc = await asyncio.create_subprocess_exec(
        *COMMAND, "local", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert "ready" in line, line
        [server] = children(proc.pid)
        assert command_line(server)[:3] == [sys.executable, "-m", "kadmit.localcluster"]
        yield proc, server
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def test_a_dead_api_server_is_one_line_and_exit_1(tmp_path: Path) -> None:
    async with kadmit_local("--kubeconfig", str(tmp_path / "kc"), "--no-samples") as (proc, server):
        os.kill(server, signal.SIGKILL)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    expected = f"kadmit: error: the API server (pid {server}) was killed by SIGKILL; kadmit local stops"
    lines = err.decode().strip().splitlines()
    assert lines[-1] == expected
    # kadmit's complaints that the server does not answer are dropped once it is known dead; one
    # logged in the instant between its sockets closing and its death showing may still be there
    assert all(line.startswith('{"ts": ') for line in lines[:-1]), lines


async def test_api_only_reports_a_dead_api_server_the_same_way(tmp_path: Path) -> None:
    async with kadmit_local("--api-only", "--kubeconfig", str(tmp_path / "kc")) as (proc, server):
        os.kill(server, signal.SIGTERM)  # stopped behind kadmit local's back: still not what it asked
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    expected = f"kadmit: error: the API server (pid {server}) exited with code 0; kadmit local stops"
    assert err.decode().strip().splitlines() == [expected]


async def test_sigterm_stops_kadmit_and_then_its_api_server(tmp_path: Path) -> None:
    async with kadmit_local("--kubeconfig", str(tmp_path / "kc"), "--no-samples") as (proc, server):
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err.decode()[-2000:]
        assert err.decode().strip().splitlines()[-1] == "kadmit local: stopped"
        assert gone(server)


async def test_the_api_server_does_not_outlive_a_killed_kadmit_local(tmp_path: Path) -> None:
    """SIGKILL leaves kadmit local no chance to stop its child: the child sees its stdin end."""
    async with kadmit_local("--api-only", "--kubeconfig", str(tmp_path / "kc")) as (proc, server):
        proc.kill()
        await proc.wait()
        await until_gone(server)


LOOPBACK = ("0100007F", "00000000000000000000000001000000")  # 127.0.0.1 and ::1 as /proc writes them


def listening_addresses(pid: int) -> set[str]:
    """The ``address:port`` (hex, as /proc/net/tcp writes it) of every TCP socket ``pid`` listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for row in path.read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(fields[1])
    return found


async def test_kadmit_local_listens_on_the_loopback_only(tmp_path: Path) -> None:
    """Under kadmit local, kadmit's webhook, metrics and probes are for this machine alone."""
    async with kadmit_local("--no-samples", "--kubeconfig", str(tmp_path / "kubeconfig")) as (proc, server):
        for pid in (proc.pid, server):
            addresses = listening_addresses(pid)
            assert addresses, f"process {pid} listens on nothing"
            loopback = {a for a in addresses if a.split(":")[0] in LOOPBACK}
            assert addresses == loopback, f"process {pid} listens beyond the loopback: {addresses - loopback}"
