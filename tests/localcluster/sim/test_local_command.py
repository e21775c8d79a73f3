"""``kadmit local --api-only --nodes FILE`` as a user runs it: an ordinary Job made with kubectl completes."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest

from kadmit.controller.cli import main

COMMAND = [sys.executable, "-m", "kadmit"]
NODES = """\
defaultRuntime: 200ms
pools:
- name: small
  names: [small-a, small-b]
  labels: {zone: a}
  allocatable: {cpu: "2", memory: 4Gi}
"""


async def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 40)
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
    return out.decode()


async def test_kubectl_job_runs_to_complete_on_the_configured_nodes(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES)
    kubeconfig = tmp_path / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        *COMMAND, "local", "--api-only", "--kubeconfig", str(kubeconfig), "--nodes", str(nodes),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        ready = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert b"ready" in ready, ready
        listed = json.loads(await kubectl(kubeconfig, "get", "nodes", "-o", "json"))
        assert sorted(n["metadata"]["name"] for n in listed["items"]) == ["small-a", "small-b"]
        # kubectl's typed "create job" posts protobuf, which the local API server does not read;
        # the same generator through a manifest posts JSON.
        manifest = await kubectl(kubeconfig, "create", "job", "hello", "--image=busybox", "--dry-run=client",
                                 "-o", "yaml", "--", "echo", "hi")
        await kubectl(kubeconfig, "create", "-f", "-", stdin=manifest)
        await kubectl(kubeconfig, "wait", "--for=condition=complete", "job/hello", "--timeout=30s")
        job = json.loads(await kubectl(kubeconfig, "get", "job", "hello", "-o", "json"))
        assert job["status"]["succeeded"] == 1
        pods = json.loads(await kubectl(kubeconfig, "get", "pods", "-l", "job-name=hello", "-o", "json"))
        [pod] = pods["items"]
        assert pod["spec"]["nodeName"] in ("small-a", "small-b")
        assert pod["status"]["phase"] == "Succeeded"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()[-2000:]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("pools: [{name: a, allocatable: {cpu: many}}]", "invalid quantity 'many'"),
        ("pools: [{name: a, count: 2, maxCount: 1}]", "maxCount: 1 is below the initial 2 nodes"),
    ],
)
def test_bad_nodes_file_exits_1_with_one_line(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(text)
    code = main(["local", "--api-only", "--kubeconfig", str(tmp_path / "kc"), "--nodes", str(nodes)])
    assert code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "kc").exists()  # nothing half-written
