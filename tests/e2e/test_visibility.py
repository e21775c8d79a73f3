"""The Visibility API on ``kadmit local``, as a user reaches it: ``kubectl get --raw`` through
the API server's aggregation layer, to kadmit's visibility server, from the engine's queues."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.kadmit_local import kadmit_local as running_kadmit_local

V2 = "/apis/visibility.kueue.x-k8s.io/v1beta2"
V1 = "/apis/visibility.kueue.x-k8s.io/v1beta1"
V2_SERVICE = "v1beta2.visibility.kueue.x-k8s.io"
pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: on-demand}
spec:
  nodeLabels: {kadmit.dev/pool: cpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
"""


def job(name: str, priority_class: str | None = None) -> str:
    labels = {"kueue.x-k8s.io/queue-name": "lq"}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    return json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {
                "template": {
                    "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": "600s"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                        ],
                    },
                }
            },
        }
    )


async def run(*args: str, stdin: str | None = None, check: bool = True) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
    code = proc.returncode or 0
    if check:
        assert code == 0, f"{' '.join(args)}: {err.decode()}"
    return code, out.decode(), err.decode()


async def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    return (await run("kubectl", "--kubeconfig", str(kubeconfig), *args, stdin=stdin))[1]


async def raw(kubeconfig: Path, path: str) -> Any:
    return json.loads(await kubectl(kubeconfig, "get", "--raw", path))


@contextlib.asynccontextmanager
async def kadmit_local(tmp_path: Path) -> AsyncIterator[Path]:
    """``kadmit local --no-samples``, ready; its kubeconfig."""
    async with running_kadmit_local(tmp_path, "--no-samples") as local:
        yield local.kubeconfig


async def ten_jobs_two_admitted(kubeconfig: Path) -> list[str]:
    """SETUP and ten 1-cpu Jobs in a 2-cpu ClusterQueue; the names of the eight pending Workloads."""
    await kubectl(kubeconfig, "apply", "-f", "-", stdin=SETUP)
    for i in range(10):
        await kubectl(kubeconfig, "create", "-f", "-", stdin=job(f"job-{i}"))
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        summary = await raw(kubeconfig, f"{V2}/clusterqueues/cq/pendingworkloads")
        workloads = json.loads(await kubectl(kubeconfig, "get", "workloads", "-o", "json"))["items"]
        reserved = [w for w in workloads if (w.get("status") or {}).get("admission")]
        if len(workloads) == 10 and len(reserved) == 2 and len(summary["items"]) == 8:
            return [w["metadata"]["name"] for w in workloads if not (w.get("status") or {}).get("admission")]
        assert asyncio.get_running_loop().time() < deadline, (len(workloads), len(reserved), summary)
        await asyncio.sleep(0.3)


async def test_pending_workloads_positions_through_kubectl(tmp_path: Path) -> None:
    async with kadmit_local(tmp_path) as kubeconfig:
        pending = await ten_jobs_two_admitted(kubeconfig)

        summary = await raw(kubeconfig, f"{V2}/clusterqueues/cq/pendingworkloads")
        assert summary["kind"] == "PendingWorkloadsSummary"
        assert summary["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
        items = summary["items"]
        # Kueue counts positions from 0: eight pending Workloads are 0..7, in both queues.
        assert [i["positionInClusterQueue"] for i in items] == list(range(8))
        assert [i["positionInLocalQueue"] for i in items] == list(range(8))
        assert sorted(i["metadata"]["name"] for i in items) == sorted(pending)
        first = items[0]
        assert first["localQueueName"] == "lq" and first["priority"] == 0
        assert first["metadata"]["namespace"] == "default" and first["metadata"]["creationTimestamp"]
        [owner] = first["metadata"]["ownerReferences"]
        assert owner["kind"] == "Job" and owner["apiVersion"] == "batch/v1" and owner["uid"]
        order = [i["metadata"]["name"] for i in items]

        # limit and offset, on both endpoints and both versions
        page = await raw(kubeconfig, f"{V2}/clusterqueues/cq/pendingworkloads?limit=3&offset=2")
        assert [i["metadata"]["name"] for i in page["items"]] == order[2:5]
        assert [i["positionInClusterQueue"] for i in page["items"]] == [2, 3, 4]
        local = await raw(kubeconfig, f"{V2}/namespaces/default/localqueues/lq/pendingworkloads")
        assert [i["metadata"]["name"] for i in local["items"]] == order
        page = await raw(
            kubeconfig, f"{V1}/namespaces/default/localqueues/lq/pendingworkloads?offset=6&limit=5"
        )
        assert page["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
        assert [(i["positionInLocalQueue"], i["positionInClusterQueue"]) for i in page["items"]] == [
            (6, 6),
            (7, 7),
        ]

        # a higher-priority Job goes to the head of the queue
        await kubectl(kubeconfig, "create", "-f", "-", stdin=job("urgent", priority_class="high"))
        deadline = asyncio.get_running_loop().time() + 20
        while True:
            items = (await raw(kubeconfig, f"{V2}/clusterqueues/cq/pendingworkloads"))["items"]
            if len(items) == 9:
                break
            assert asyncio.get_running_loop().time() < deadline, items
            await asyncio.sleep(0.2)
        assert items[0]["metadata"]["ownerReferences"][0]["name"] == "urgent"
        assert items[0]["priority"] == 100
        assert [i["metadata"]["name"] for i in items[1:]] == order

        # errors as Kueue's server words them
        code, _, err = await run(
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "get",
            "--raw",
            f"{V2}/clusterqueues/nope/pendingworkloads",
            check=False,
        )
        assert code == 1 and 'clusterqueue.visibility.kueue.x-k8s.io "nope" not found' in err
        code, _, err = await run(
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "get",
            "--raw",
            f"{V2}/namespaces/default/localqueues/nope/pendingworkloads",
            check=False,
        )
        assert code == 1 and 'localqueue.visibility.kueue.x-k8s.io "nope" not found' in err


async def test_discovery_and_503_when_the_visibility_server_is_unreachable(tmp_path: Path) -> None:
    async with kadmit_local(tmp_path) as kubeconfig:
        versions = await kubectl(kubeconfig, "api-versions")
        assert "visibility.kueue.x-k8s.io/v1beta2" in versions.split()
        assert "visibility.kueue.x-k8s.io/v1beta1" in versions.split()
        group = await raw(kubeconfig, "/apis/visibility.kueue.x-k8s.io")
        assert group["preferredVersion"]["version"] == "v1beta2"
        resources = await raw(kubeconfig, V2)
        names = {r["name"]: r["verbs"] for r in resources["resources"]}
        assert names["clusterqueues/pendingworkloads"] == ["get"]
        assert names["localqueues/pendingworkloads"] == ["get"]
        services = await kubectl(kubeconfig, "get", "apiservices")
        rows = {line.split()[0]: line.split() for line in services.splitlines()}
        assert rows["NAME"][:3] == ["NAME", "SERVICE", "AVAILABLE"]
        assert rows["v1beta2.visibility.kueue.x-k8s.io"][1:3] == [
            "kadmit-system/kadmit-visibility-server",
            "True",
        ]

        # Only the API server's front proxy may ask: a direct call to kadmit's port is refused.
        port = await kubectl(
            kubeconfig,
            "-n",
            "kadmit-system",
            "get",
            "endpoints",
            "kadmit-visibility-server",
            "-o",
            "jsonpath={.subsets[0].ports[0].port}",
        )
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"https://127.0.0.1:{port}{V2}/clusterqueues/cq/pendingworkloads", ssl=False
            ) as direct,
        ):
            assert direct.status == 401
            assert (await direct.json())["reason"] == "Unauthorized"

        # Route the Service to a port nothing listens on: kubectl gets a 503 that says why.
        patch = json.dumps(
            {"subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 1}]}]}
        )
        await kubectl(
            kubeconfig,
            "-n",
            "kadmit-system",
            "patch",
            "endpoints",
            "kadmit-visibility-server",
            "--type=merge",
            "-p",
            patch,
        )
        code, _, err = await run(
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "get",
            "--raw",
            f"{V2}/clusterqueues/cq/pendingworkloads",
            check=False,
        )
        assert code == 1
        assert "ServiceUnavailable" in err and "v1beta2.visibility.kueue.x-k8s.io" in err, err
        assert "connection refused" in err, err
        deadline = asyncio.get_running_loop().time() + 10
        while "False (FailedDiscoveryCheck)" not in await kubectl(
            kubeconfig, "get", "apiservice", V2_SERVICE
        ):
            assert asyncio.get_running_loop().time() < deadline, "the APIService stayed Available"
            await asyncio.sleep(0.5)
