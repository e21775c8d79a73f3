"""``kadmit local`` as a user runs it: the real process, its ready line, then kubectl only.

The README's walkthrough: a Job created with kubectl is suspended by kadmit's webhook, admitted,
started on the sample flavor's nodes, and completes; a bad option is one line and exit code 2.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from kadmit.controller.cli import main
from tests.kadmit_local import ENGINE_BUILD, kadmit_local

COMMAND = [sys.executable, "-m", "kadmit"]

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: walkthrough
spec:
  parallelism: 2
  completions: 2
  template:
    metadata:
      annotations:
        localcluster.kadmit.dev/runtime: 300ms
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: ["sleep", "1"]
        resources:
          requests: {cpu: "1", memory: 200Mi}
"""


async def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 30)
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
    return out.decode()


async def kubectl_json(kubeconfig: Path, *args: str) -> Any:
    return json.loads(await kubectl(kubeconfig, *args, "-o", "json"))


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_walkthrough_with_kubectl(tmp_path: Path) -> None:
    async with kadmit_local(tmp_path) as local:
        kubeconfig = local.kubeconfig
        line = local.ready
        assert line.startswith(f"kadmit local: ready; kubeconfig {tmp_path / 'kubeconfig'} "), line
        assert "(API https://127.0.0.1:" in line, line  # kubectl sends the admin token only over TLS
        assert (await local.next_line()).startswith("kadmit local: manages batch/v1 Job ")
        assert (await local.next_line()).startswith(f"kadmit local: engine {ENGINE_BUILD}")
        await kubectl(kubeconfig, "create", "-f", "-", stdin=JOB)
        job = await kubectl_json(kubeconfig, "get", "job", "walkthrough")
        # no queue label given: the namespace's "default" LocalQueue was set by kadmit's webhook
        assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            job = await kubectl_json(kubeconfig, "get", "job", "walkthrough")
            conditions = {c["type"]: c["status"] for c in job.get("status", {}).get("conditions", [])}
            if conditions.get("Complete") == "True":
                break
            assert asyncio.get_running_loop().time() < deadline, job.get("status")
            await asyncio.sleep(0.2)
        assert job["spec"]["template"]["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
        pods = await kubectl_json(kubeconfig, "get", "pods", "-l", "batch.kubernetes.io/job-name=walkthrough")
        assert len(pods["items"]) == 2
        assert all(p["spec"]["nodeName"].startswith("cpu-") for p in pods["items"])
        workloads = await kubectl_json(kubeconfig, "get", "workloads")
        [wl] = workloads["items"]
        states = {c["type"]: c["status"] for c in wl["status"]["conditions"]}
        assert states["Admitted"] == "True" and states["Finished"] == "True"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["--kubeconfig", "KC", "--config", "/nonexistent.yaml"],
            1,
            "config /nonexistent.yaml: cannot read: No such",
        ),
        (["--kubeconfig", "KC", "--nodes", "/nonexistent.yaml"], 1, "--nodes /nonexistent.yaml"),
        (["--api-only"], 2, "--api-only needs --kubeconfig PATH"),
        (["--api-only", "--kubeconfig", "KC", "--config", "c.yaml"], 2, "--config runs kadmit"),
    ],
)
def test_bad_options_exit_with_one_line(
    args: list[str], code: int, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [str(tmp_path / "kc") if a == "KC" else a for a in args]
    assert main(["local", *args]) == code  # 1: a file it cannot use; 2: options that do not go together
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
