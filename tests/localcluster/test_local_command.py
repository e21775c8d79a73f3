"""``kadmit local --api-only``: a real process, its ready line, kubectl against it, SIGTERM."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import sys
from pathlib import Path

import pytest
import yaml

from kadmit.controller.cli import main

# The ``kadmit`` command, run with this interpreter.
COMMAND = [sys.executable, "-m", "kadmit", "local"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_api_only_serves_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kube" / "config"
    proc = await asyncio.create_subprocess_exec(
        *COMMAND,
        "--api-only",
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("kadmit local: API server ready at https://127.0.0.1:")
        config = yaml.safe_load(kubeconfig.read_text())
        # no --token: one is made up anyway, and the kubeconfig carries it and the CA
        assert config["users"][0]["user"]["token"]
        assert config["clusters"][0]["cluster"]["certificate-authority-data"]
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
        whoami = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", str(kubeconfig), "auth", "whoami", "-o", "jsonpath={.status.userInfo}",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(whoami.communicate(), 30)
        assert whoami.returncode == 0, err.decode()
        admin = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}
        assert json.loads(out) == admin
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 30)
    assert code == 0


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--api-only", "--kubeconfig", "x", "--port", "70000"], 2, "--port must be between 0 and 65535"),
        (["--api-only", "--kubeconfig", "/", "--port", "0"], 1, "is a directory"),
        (["--api-only", "--kubeconfig", "x", "--history-window", "0"], 2, "--history-window must be"),
        (["--api-only", "--kubeconfig", "x", "--token", "a b"], 2, "--token must be a non-empty string"),
    ],
)
def test_bad_arguments_exit_with_one_line(
    args: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["local", *args]) == code  # 2: the command line is wrong; 1: the disk is in the way
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and message in err


def test_port_in_use_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["local", "--api-only", "--kubeconfig", str(tmp_path / "config"), "--port", str(port)])
    assert code == 1  # a runtime failure, not a usage error
    assert (
        capsys.readouterr().err.strip()
        == f"kadmit: error: cannot listen on 127.0.0.1:{port}: address already in use"
    )
    assert not (tmp_path / "config").exists()


def test_https_is_no_option(capsys: pytest.CaptureFixture[str]) -> None:
    """The server always serves HTTPS; the flag that said so was removed rather than kept as a no-op."""
    with pytest.raises(SystemExit) as refused:
        main(["local", "--api-only", "--kubeconfig", "x", "--https"])
    assert refused.value.code == 2
    assert "unrecognized arguments: --https" in capsys.readouterr().err
