"""The install as docs/deploy.md documents it, against ``kadmit local --api-only``.

``kubectl apply --server-side -k manifests/`` installs the CRDs, RBAC, configuration, Services
and webhooks; then kadmit starts as the Deployment starts it — ``kadmit run --config`` with the
ConfigMap's configuration (only its bind addresses moved to free ports, since several runs share
this machine), on a token of the ServiceAccount (``kubectl create token``), issuing its own
certificate into its Secret and injecting the CA — while the webhook Service's Endpoints point at
it, as an endpoints controller would point them at the pod. A Job goes through it; then
``kubectl delete -k manifests/ --ignore-not-found`` removes everything the install and kadmit created.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kadmit.controller import local_setup
from tests.e2e.conftest import MANIFESTS
from tests.e2e.helpers import SMALL_SETUP

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
NODES = """
pools:
- name: cpu
  count: 2
  allocatable: {cpu: "8", memory: 32Gi}
"""
JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: after-install
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: small}
spec:
  parallelism: 2
  completions: 2
  template:
    metadata:
      annotations: {localcluster.kadmit.dev/runtime: 300ms}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources:
          requests: {cpu: "1", memory: 100Mi}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def run(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=env,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@contextlib.asynccontextmanager
async def process(
    *args: str, ready: str, env: dict[str, str] | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    try:
        assert proc.stdout is not None
        if ready:
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            assert ready in line, line
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def test_install_run_a_job_and_uninstall_as_documented(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES)
    local = [sys.executable, "-m", "kadmit", "local", "--api-only", "--kubeconfig", str(kubeconfig)]
    async with process(*local, "--nodes", str(nodes), ready="kadmit local: API server ready at"):

        async def kubectl(*args: str, stdin: str = "", config: Path = kubeconfig) -> tuple[int, str, str]:
            return await run("kubectl", "--kubeconfig", str(config), *args, stdin=stdin)

        code, out, err = await kubectl("apply", "--server-side", "-k", str(MANIFESTS))
        assert code == 0, err
        assert "deployment.apps/kadmit-controller-manager serverside-applied" in out
        # idempotent, as a GitOps loop re-applies it
        code, out, err = await kubectl("apply", "--server-side", "-k", str(MANIFESTS))
        assert code == 0, err

        # What the Deployment's pod would get: its args, the ConfigMap, the ServiceAccount's token.
        code, out, err = await kubectl(
            "get", "deployment", "kadmit-controller-manager", "-n", "kadmit-system", "-o", "json"
        )
        assert code == 0, err
        container = json.loads(out)["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == ["kadmit", "run"]
        code, out, err = await kubectl(
            "get", "configmap", "kadmit-manager-config", "-n", "kadmit-system", "-o", "json"
        )
        config: dict[str, Any] = yaml.safe_load(json.loads(out)["data"]["config.yaml"])
        webhook_port = free_port()
        config["webhook"]["port"] = webhook_port
        config["metrics"]["bindAddress"] = f"127.0.0.1:{free_port()}"
        config["health"]["healthProbeBindAddress"] = f"127.0.0.1:{free_port()}"
        config_path = tmp_path / "etc-kadmit" / "config.yaml"
        config_path.parent.mkdir()
        config_path.write_text(yaml.safe_dump(config))
        code, token, err = await kubectl(
            "create", "token", "kadmit-controller-manager", "-n", "kadmit-system"
        )
        assert code == 0, err
        pod_kubeconfig = tmp_path / "in-pod-kubeconfig"
        pod_kubeconfig.write_text(
            yaml.safe_dump(local_setup.kubeconfig_with_token(kubeconfig, token.strip()))
        )
        # the endpoints controller's part: the webhook Service routes to the "pod"
        service = next(
            d for d in yaml.safe_load_all((MANIFESTS / "base" / "services.yaml").read_text())
            if d and d["metadata"]["name"] == "kadmit-webhook-service"
        )  # fmt: skip
        endpoints = local_setup.endpoints_for(service, "127.0.0.1", webhook_port)
        code, _, err = await kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(endpoints))
        assert code == 0, err

        args = [*container["command"], *container["args"]]
        args[args.index("--config") + 1] = str(config_path)
        env = {**os.environ, "POD_NAME": "kadmit-controller-manager-0", "POD_NAMESPACE": "kadmit-system"}
        kadmit = [sys.executable, "-m", "kadmit", *args[1:], "--kubeconfig", str(pod_kubeconfig)]
        async with process(*kadmit, ready="", env=env) as running:

            async def becomes_ready() -> None:
                while True:
                    code, out, _ = await kubectl(
                        "get",
                        "validatingwebhookconfiguration",
                        "kadmit-validating-webhook-configuration",
                        "-o",
                        "json",
                    )
                    hooks = json.loads(out)["webhooks"] if code == 0 else []
                    if hooks and all(h["clientConfig"].get("caBundle") for h in hooks):
                        return
                    assert running.returncode is None, "kadmit exited"
                    await asyncio.sleep(0.3)

            await asyncio.wait_for(becomes_ready(), 60)
            code, _, err = await kubectl("apply", "--server-side", "-f", "-", stdin=SMALL_SETUP)
            assert code == 0, err

            async def job_created() -> None:  # the webhooks are trusted a moment after the CA lands
                while True:
                    code, _, _ = await kubectl("create", "-f", "-", stdin=JOB)
                    if code == 0:
                        return
                    await asyncio.sleep(0.5)

            await asyncio.wait_for(job_created(), 30)
            code, out, err = await kubectl(
                "wait", "--for=condition=Complete", "job/after-install", "--timeout=60s"
            )
            assert code == 0, err
            code, out, err = await kubectl("get", "workloads", "-n", "default", "-o", "json")
            [workload] = json.loads(out)["items"]
            assert any(
                c["type"] == "Admitted" and c["status"] == "True" for c in workload["status"]["conditions"]
            )
            code, out, _ = await kubectl("get", "secret", "kadmit-webhook-server-cert", "-n", "kadmit-system")
            assert code == 0  # kadmit's own certificate
            # before uninstalling, the user's Jobs and queues go while kadmit still runs: it lifts
            # its finalizer (kueue.x-k8s.io/resource-in-use) from their Workloads
            code, _, err = await kubectl("delete", "job", "after-install", "--cascade=background")
            assert code == 0, err
            code, _, err = await kubectl(
                "delete", "-f", "-", "--wait=true", "--timeout=30s", stdin=SMALL_SETUP
            )
            assert code == 0, err
            code, _, err = await kubectl(
                "wait", "--for=delete", "workloads", "--all", "-n", "default", "--timeout=30s"
            )
            assert code == 0, err
        # uninstall: kadmit is gone (its Deployment deleted), then everything installed goes
        code, out, err = await kubectl(
            "delete", "-k", str(MANIFESTS), "--ignore-not-found", "--wait=true", "--timeout=60s"
        )
        assert code == 0, err
        for kind in ("crd", "clusterrole", "clusterrolebinding", "mutatingwebhookconfiguration",
                     "validatingwebhookconfiguration", "namespace"):  # fmt: skip
            code, out, err = await kubectl("get", kind, "-o", "name")
            assert code == 0, err
            left = [n for n in out.split() if "kadmit" in n or "kueue.x-k8s.io" in n]
            assert left == [], left
        code, out, _ = await kubectl("get", "secrets,leases", "-n", "kadmit-system", "-o", "name")
        assert out.strip() == ""
