"""``python -m kadmit.localcluster`` as a process: its ready line, kubectl against it, how it stops,
and its one-line errors."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
import yaml

from kadmit.localcluster.cli import build_cluster, build_parser, loop_factory

COMMAND = [sys.executable, "-m", "kadmit.localcluster"]
READY = "localcluster: API server ready at https://127.0.0.1:"
kubectl_missing = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
NODES = """\
pools:
- name: small
  names: [small-a]
  labels: {zone: a}
  allocatable: {cpu: "2", memory: 4Gi}
"""


@asynccontextmanager
async def server(
    *args: str, stdin: int = asyncio.subprocess.DEVNULL
) -> AsyncIterator[asyncio.subprocess.Process]:
    """The running server, once its ready line is out; it is SIGTERMed afterwards if still running."""
    proc = await asyncio.create_subprocess_exec(
        *COMMAND, *args, stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith(READY), line
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)


async def run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@kubectl_missing
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
async def test_serves_kubectl_with_labelled_nodes_until_a_signal(
    tmp_path: Path, stop: signal.Signals
) -> None:
    (tmp_path / "nodes.yaml").write_text(NODES)
    kubeconfig = tmp_path / "kubeconfig"
    async with server("--kubeconfig", str(kubeconfig), "--nodes", str(tmp_path / "nodes.yaml"),
                      "--pool-label", "example.com/pool", "--token", "s3cret") as proc:
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["users"][0]["user"] == {"token": "s3cret"}
        assert config["clusters"][0]["cluster"]["certificate-authority-data"]
        code, out, err = await run("kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "json")
        assert code == 0, err
        [node] = json.loads(out)["items"]
        assert node["metadata"]["name"] == "small-a"
        assert node["metadata"]["labels"]["example.com/pool"] == "small"
        assert node["metadata"]["labels"]["zone"] == "a"
        proc.send_signal(stop)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert proc.stderr is not None
        assert (await proc.stderr.read()).decode().strip() == "localcluster: stopped"


@kubectl_missing
async def test_no_nodes_is_the_api_server_alone(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    async with server("--kubeconfig", str(kubeconfig), "--no-nodes"):
        code, out, err = await run("kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "name")
        assert (code, out) == (0, ""), err


async def test_until_stdin_closes_stops_with_its_supervisor(tmp_path: Path) -> None:
    """The supervisor holds the write end of stdin: when it goes (even killed), so does the server."""
    async with server("--kubeconfig", str(tmp_path / "kc"), "--no-nodes", "--until-stdin-closes",
                      stdin=asyncio.subprocess.PIPE) as proc:
        assert proc.stdin is not None
        await asyncio.sleep(0.2)
        assert proc.returncode is None
        proc.stdin.close()
        assert await asyncio.wait_for(proc.wait(), 30) == 0


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, "the following arguments are required: --kubeconfig"),
        (["--kubeconfig", "x", "--port", "70000"], 2, "--port must be between 0 and 65535, got 70000"),
        (["--kubeconfig", "x", "--history-window", "0"], 2, "--history-window must be at least 1, got 0"),
        (["--kubeconfig", "x", "--token", "a b"], 2, "--token must be a non-empty string without whitespace"),
        (["--kubeconfig", "x", "--nodes", "n.yaml", "--no-nodes"], 2,
         "argument --no-nodes: not allowed with argument --nodes"),
        (["--kubeconfig", "x", "--no-nodes", "--pool-label", "p"], 2,
         "--pool-label labels the simulated nodes: not with --no-nodes"),
        (["--kubeconfig", "x", "--pool-label", "a b"], 2, "--pool-label 'a b' is not a valid label key"),
        (["--kubeconfig", "/"], 1, "--kubeconfig / is a directory"),
        (["--kubeconfig", "x", "--nodes", "/nonexistent.yaml"], 1,
         "--nodes /nonexistent.yaml: /nonexistent.yaml: No such file or directory"),
    ],
)
async def test_errors_are_one_line_exit_2_for_usage_1_for_the_rest(
    args: list[str], code: int, message: str, tmp_path: Path
) -> None:
    args = [str(tmp_path / a) if a in ("x", "n.yaml") else a for a in args]
    got, out, err = await run(*COMMAND, *args)
    assert (got, out, err) == (code, "", f"localcluster: error: {message}\n")
    assert not (tmp_path / "x").exists()  # nothing written


async def test_a_port_in_use_is_a_runtime_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = await run(*COMMAND, "--kubeconfig", str(tmp_path / "kc"), "--port", str(port))
    assert (code, out) == (1, "")
    assert err == f"localcluster: error: cannot listen on 127.0.0.1:{port}: address already in use\n"
    assert not (tmp_path / "kc").exists()


def test_uvloop_where_installed_the_standard_loop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    uvloop = pytest.importorskip("uvloop")
    monkeypatch.delenv("KADMIT_EVENT_LOOP", raising=False)
    assert loop_factory() is uvloop.new_event_loop
    monkeypatch.setenv("KADMIT_EVENT_LOOP", "uvloop")
    assert loop_factory() is uvloop.new_event_loop
    monkeypatch.setenv("KADMIT_EVENT_LOOP", "asyncio")
    assert loop_factory() is None


async def test_an_unknown_event_loop_is_a_usage_error_before_anything_is_written(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        *COMMAND, "--kubeconfig", str(tmp_path / "kc"), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "KADMIT_EVENT_LOOP": "trio"},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert (proc.returncode, out, err.decode()) == (
        2, b"", "localcluster: error: KADMIT_EVENT_LOOP must be uvloop or asyncio, not 'trio'\n"
    )
    assert not (tmp_path / "kc").exists()



async def test_the_process_keeps_no_record_of_requests_that_nothing_could_read(tmp_path: Path) -> None:
    """`kadmit local` runs the API server as a process of its own: the request record (bodies
    included) that tests read from an in-process cluster would be memory and CPU for nothing."""
    args = build_parser().parse_args(["--kubeconfig", str(tmp_path / "kc"), "--no-nodes"])
    cluster, _ = build_cluster(args)
    async with cluster, aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bearer {cluster.token}"}
        async with http.get(f"{cluster.url}/api/v1/namespaces", headers=headers, ssl=False) as resp:
            assert resp.status == 200
        assert len(cluster.requests) == 0
