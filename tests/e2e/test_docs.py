"""The README's and the quickstart's commands, run as written against ``kadmit local`` (issue 13).

Every fenced ``sh`` block of a document runs, in order, in one bash session (as a user pastes
them into one terminal), in a directory holding the checkout's ``.venv`` and ``manifests/``, with
``kadmit local`` started there as the document's ``sh setup`` block starts it. A ``sh setup``
block (install, start ``kadmit local``, run the test suite) is what this test does itself: it
may hold only those commands.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.kadmit_local import kadmit_local

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.S | re.M)
SETUP_COMMANDS = re.compile(
    r"^(python3 -m venv \.venv|\. \.venv/bin/activate|pip install -e \S+|kadmit local|python -m pytest)$"
)

pytestmark = [
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
    pytest.mark.skipif(not (VENV / "bin" / "activate").exists(), reason="the tests do not run in a venv"),
]


def blocks(document: Path) -> tuple[list[str], list[str]]:
    """The document's runnable ``sh`` blocks and its ``sh setup`` blocks, in order."""
    runnable: list[str] = []
    setup: list[str] = []
    for lang, info, body in FENCE.findall(document.read_text()):
        if lang not in ("sh", "bash"):
            continue
        (setup if "setup" in info.split() else runnable).append(body)
    return runnable, setup


def setup_commands(block: str) -> list[str]:
    commands = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        commands += [c.strip() for c in line.split("&&") if c.strip()]
    return commands


@pytest.mark.parametrize("document", ["README.md", "docs/quickstart.md"])
async def test_every_command_runs_as_written(document: str, tmp_path: Path) -> None:
    runnable, setup = blocks(ROOT / document)
    assert runnable and setup, f"{document}: no shell blocks found"
    for block in setup:
        for command in setup_commands(block):
            assert SETUP_COMMANDS.match(command), (
                f"{document}: a setup block runs {command!r}, which no test runs"
            )
    (tmp_path / ".venv").symlink_to(VENV)
    (tmp_path / "manifests").symlink_to(ROOT / "manifests")
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "VIRTUAL_ENV")}
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    async with kadmit_local(tmp_path, command=["kadmit"], kubeconfig=False, cwd=tmp_path, env=env):
        script = ["set -euo pipefail"]
        for number, block in enumerate(runnable, 1):
            script += [f"echo '### block {number}' >&2", block]
        shell = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            "\n".join(script),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(shell.communicate(), 150)
        output = out.decode()
        assert shell.returncode == 0, f"{document}: exit {shell.returncode}\n{output[-4000:]}"
    assert "error:" not in output.lower(), output[-4000:]
    if document == "docs/quickstart.md":  # the walkthrough shows what it promises
        assert "insufficient unused quota for cpu in flavor cpu, 4 more needed" in output, output
        assert "Preempted to accommodate a workload" in output, output
