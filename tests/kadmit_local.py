"""``kadmit local`` as a user runs it, for the tests that need the whole command.

One way to start it, so that every such test reads its stdout line by line while it runs, sends
its stderr to a file (a pipe nobody reads fills at 64 KiB and stalls kadmit), stops it with
SIGTERM, and fails with the tail of its log if it did not exit cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

from kadmit.engine import COMPILED

COMMAND = (sys.executable, "-m", "kadmit")
READY = "kadmit local: ready"
KUBECONFIG = re.compile(r"; kubeconfig (\S+)")
CLUSTER_LINE = re.compile(r"kadmit local: (manager|worker) +(\S+): kubectl --kubeconfig (\S+) ")
ENGINE_BUILD = "compiled by mypyc" if COMPILED else "interpreted (an editable install;"
"""How kadmit local names this install's engine after its ready line (the tests run the same
install: an editable one is interpreted, the wheel's compiled)."""
STOP_WITHIN = 30.0
LOG_TAIL = 3000


class KadmitLocal:
    """A running ``kadmit local``: its kubeconfig, its ready line and what it prints after it."""

    def __init__(self, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.proc = proc
        self.kubeconfig = Path()  # the one its ready line names (with --workers: the manager's)
        self.workers: dict[str, Path] = {}  # with --workers: each worker's kubeconfig, by name
        self.log = log
        self.ready = ""
        self._lines: asyncio.Queue[str] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            self._lines.put_nowait(raw.decode(errors="replace"))
        self._lines.put_nowait("")  # end of output

    async def next_line(self, within: float = 10.0) -> str:
        """The next line it prints on stdout ('' once it has closed its stdout)."""
        try:
            return await asyncio.wait_for(self._lines.get(), within)
        except TimeoutError:
            message = f"kadmit local printed nothing within {within:g}s; {self.log_tail()}"
            raise AssertionError(message) from None

    def log_tail(self) -> str:
        text = self.log.read_text(errors="replace").strip() if self.log.exists() else ""
        return f"its stderr ends with:\n{text[-LOG_TAIL:]}" if text else "its stderr is empty"


@contextlib.asynccontextmanager
async def kadmit_local(
    directory: Path,
    *args: str,
    command: Sequence[str] = COMMAND,
    kubeconfig: Path | bool = True,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    ready_within: float = 90.0,
) -> AsyncIterator[KadmitLocal]:
    """``kadmit local --kubeconfig DIRECTORY/kubeconfig ARGS``, once it has printed its ready line.

    On the way out: SIGTERM, and the test fails unless it exits 0 within 30 s.
    ``kubeconfig=False`` leaves the flag out (the command's own default, as a user types it)."""
    if kubeconfig is True:
        kubeconfig = directory / "kubeconfig"
    flags = ["--kubeconfig", str(kubeconfig)] if isinstance(kubeconfig, Path) else []
    log = directory / "kadmit-local.stderr"
    with log.open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            *command, "local", *flags, *args, cwd=cwd, env=None if env is None else dict(env),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=stderr,
        )
    local = KadmitLocal(proc, log)
    local._reader = asyncio.create_task(local._read())
    try:
        local.ready = await local.next_line(ready_within)
        while (cluster := CLUSTER_LINE.match(local.ready)) is not None:  # --workers: a line per cluster
            path = (cwd or Path.cwd()) / cluster.group(3)
            if cluster.group(1) == "manager":
                local.kubeconfig = path
            else:
                local.workers[cluster.group(2)] = path
            local.ready = await local.next_line(ready_within)
        assert local.ready.startswith(READY), f"{local.ready!r}; {local.log_tail()}"
        if not local.workers:
            named = KUBECONFIG.search(local.ready)
            assert named is not None, local.ready
            local.kubeconfig = (cwd or Path.cwd()) / named.group(1)
        yield local
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STOP_WITHIN)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        await local._reader
    assert proc.returncode == 0, f"kadmit local exited with {proc.returncode}; {local.log_tail()}"
