"""``kadmit local --api-only``: a real process, its ready line, kubectl against it, SIGTERM."""

from __future__ import annotations

import asyncio
import shutil
import signal
import sys
from pathlib import Path

import pytest
import yaml

# The installed ``kadmit`` entry point, run with this interpreter.
COMMAND = [
    sys.executable,
    "-c",
    "import sys; from controller.cli import main; sys.exit(main(sys.argv[1:]))",
    "local",
]


async def run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *COMMAND, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_api_only_serves_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kube" / "config"
    proc = await asyncio.create_subprocess_exec(
        *COMMAND,
        "--api-only",
        "--kubeconfig",
        str(kubeconfig),
        "--https",
        "--token",
        "-",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("kadmit local: API server ready at https://127.0.0.1:")
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["users"][0]["user"]["token"]
        assert config["clusters"][0]["cluster"]["server"] in line
        kubectl = await asyncio.create_subprocess_exec(
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "--cache-dir",
            str(tmp_path / "cache"),
            "get",
            "ns",
            "-o",
            "name",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(kubectl.communicate(), 30)
        assert kubectl.returncode == 0, err.decode()
        assert "namespace/default" in out.decode().split()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 30)
    assert code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kubeconfig", "x"], "pass --api-only"),
        (["--api-only", "--kubeconfig", "x", "--port", "70000"], "--port must be between 0 and 65535"),
        (["--api-only", "--kubeconfig", "/", "--port", "0"], "is a directory"),
        (["--api-only", "--kubeconfig", "x", "--history-window", "0"], "--history-window must be at least 1"),
    ],
)
async def test_bad_arguments_exit_2_with_one_line(args: list[str], message: str) -> None:
    code, out, err = await run(*args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


async def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        code, _, err = await run("--api-only", "--kubeconfig", str(tmp_path / "config"), "--port", str(port))
    finally:
        server.close()
        await server.wait_closed()
    assert (
        code == 2
        and err.strip() == f"kadmit: error: cannot listen on 127.0.0.1:{port}: address already in use"
    )
