"""The local API server as a child process of ``kadmit local``, supervised.

``python -m kadmit.localcluster`` runs the embedded API server and the simulated cluster on a
core of their own; kadmit reaches it over HTTPS only, like any cluster, and never imports it.
What passes between the two processes is the child's command line and its small protocol:

* one line on stdout once it serves, ``localcluster: API server ready at <url> (kubeconfig <path>)``;
* on stderr, its log lines (relayed to this process's stderr), ``localcluster: error: <why>`` when
  it cannot start (exit code 2 for a wrong option, 1 otherwise), ``localcluster: stopped`` on exit;
* SIGTERM stops it; so does the end of its stdin, whose write end only this process holds, so
  the server never outlives ``kadmit local``, even one killed with SIGKILL.

It runs in a session of its own: a Ctrl-C in the terminal reaches ``kadmit local`` alone, which
stops kadmit first and the API server after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from kadmit.kube.lifecycle import Lifecycle, terminate

MODULE = "kadmit.localcluster"
READY = re.compile(r"^localcluster: API server ready at (\S+) ")
ERROR_PREFIX = "localcluster: error: "
STOPPED = "localcluster: stopped"
READY_TIMEOUT = 60.0  # seconds the child may take to print its ready line
STOP_GRACE = 10.0  # seconds between SIGTERM and SIGKILL


class ClusterExited(Exception):
    """The API server process ended when it should not have; ``code`` is the exit code to pass on."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class ClusterProcess(Lifecycle):
    """``python -m kadmit.localcluster <arguments>``: start it, know its URL, notice its death, stop it.

    ``async with ClusterProcess([...]) as cluster:`` starts it and waits for its ready line
    (raising :class:`ClusterExited` with the child's own one-line reason if it exits first), and
    stops it on the way out: SIGTERM, then SIGKILL after ``stop_grace`` seconds.
    """

    def __init__(self, arguments: Sequence[str], *, stop_grace: float = STOP_GRACE,
                 ready_timeout: float = READY_TIMEOUT) -> None:
        self.command = [sys.executable, "-m", MODULE, *arguments, "--until-stdin-closes"]
        self.stop_grace = stop_grace
        self.ready_timeout = ready_timeout
        self.url = ""
        self._process: asyncio.subprocess.Process | None = None
        self._relays: list[asyncio.Task[None]] = []
        self._error = ""  # the child's own "localcluster: error: ..." reason, if it gave one

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    def alive(self) -> bool:
        """Whether the server still runs as the kernel sees it: a killed child is a zombie (or
        gone) a moment before asyncio reaps it, while its closed sockets already fail kadmit's calls."""
        if not self.running:
            return False
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except FileNotFoundError:
            return False
        except OSError:
            return True  # no /proc here: what asyncio knows
        return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")

    async def start(self) -> str:
        """Spawn the server and return its URL once it says it is ready."""
        process = self._process = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert process.stdout is not None and process.stderr is not None
        relay = asyncio.create_task(self._relay_stderr(process.stderr), name="localcluster-stderr")
        self._relays.append(relay)
        ready: re.Match[str] | None = None
        try:
            async with asyncio.timeout(self.ready_timeout):
                while ready is None:
                    raw = await process.stdout.readline()
                    if not raw:
                        break  # the child closed its stdout: it is exiting
                    line = raw.decode(errors="replace")
                    ready = READY.match(line)
                    if ready is None:
                        sys.stderr.write(line)  # not ours to read: shown, as its stderr is
        except TimeoutError:
            message = f"the API server printed no ready line within {self.ready_timeout:g}s"
            raise ClusterExited(message) from None
        if ready is None:
            code = await process.wait()
            await asyncio.gather(*self._relays)
            if self._error:
                raise ClusterExited(self._error, code if code > 0 else 1)
            raise ClusterExited(f"the API server {describe_exit(code)} before it was ready")
        self.url = ready.group(1)
        self._relays.append(asyncio.create_task(self._drain(process.stdout), name="localcluster-stdout"))
        return self.url

    async def wait(self) -> int:
        """Until the process ends; its exit code (negative: the signal that ended it)."""
        assert self._process is not None
        return await self._process.wait()

    def death(self) -> str:
        """One line saying that (and how) the server ended while it was serving."""
        code = self._process.returncode if self._process is not None else None
        how = describe_exit(code) if code is not None else "stopped answering"
        return f"the API server (pid {self.pid}) {how}; kadmit local stops"

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after the grace period; idempotent."""
        process = self._process
        if process is not None:
            await terminate(process, self.stop_grace)
        if process is not None and process.stdin is not None:
            process.stdin.close()
        relays, self._relays = self._relays, []
        for relay in relays:
            with contextlib.suppress(asyncio.CancelledError):
                await relay

    async def _relay_stderr(self, stream: asyncio.StreamReader) -> None:
        """The child's log lines go to this process's stderr; its error line is kept for ours."""
        async for raw in stream:
            line = raw.decode(errors="replace")
            if line.startswith(ERROR_PREFIX):
                self._error = line[len(ERROR_PREFIX):].strip()
            elif line.strip() != STOPPED:
                sys.stderr.write(line)
                sys.stderr.flush()

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        """Read what else the child prints on stdout (nothing, normally) so its pipe never fills."""
        async for raw in stream:
            sys.stderr.write(raw.decode(errors="replace"))


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"
