"""kubectl 1.32's imperative commands, which post protobuf, against the local API server.

Each object kubectl creates is compared field by field with what the same command prints under
``--dry-run=client -o json``: the object kubectl would have sent as JSON.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.protobuf import MEDIA_TYPE
from kadmit.localcluster.sim import default_addons
from kadmit.localcluster.sim.nodeconfig import default_config

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


class Kubectl:
    def __init__(self, cluster: LocalCluster, cache: Path) -> None:
        self.base = ["kubectl", "--kubeconfig", cluster.kubeconfig, "--cache-dir", str(cache)]

    async def __call__(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            *self.base, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 40)
        assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
        return out.decode()

    async def json(self, *args: str, flags: tuple[str, ...] = ()) -> Any:
        """The command's object as JSON (flags go before a ``--`` and the container command)."""
        cut = args.index("--") if "--" in args else len(args)
        return json.loads(await self(*args[:cut], *flags, "-o", "json", *args[cut:]))


def assert_contains(actual: Any, expected: Any, path: str = "") -> None:
    """Every field kubectl set is stored as it set it (the server may add its defaults)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: {actual!r} is not an object"
        for key, value in expected.items():
            if value is not None:  # creationTimestamp: null
                assert key in actual, f"{path}.{key} is missing from {actual!r}"
                assert_contains(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{path}: {actual!r}"
        for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
            assert_contains(got, want, f"{path}[{index}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


COMMANDS = [
    (["create", "namespace", "team-a"], ["namespace", "team-a"]),
    (
        ["create", "quota", "q", "--hard=pods=2,requests.cpu=1", "-n", "team-a"],
        ["quota", "q", "-n", "team-a"],
    ),
    (
        ["create", "configmap", "cm", "--from-literal=a=b", "--from-literal=empty=", "-n", "team-a"],
        ["configmap", "cm", "-n", "team-a"],
    ),
    (
        ["create", "secret", "generic", "s", "--from-literal=k=v", "-n", "team-a"],
        ["secret", "s", "-n", "team-a"],
    ),
    (["create", "serviceaccount", "robot", "-n", "team-a"], ["serviceaccount", "robot", "-n", "team-a"]),
    (
        ["create", "service", "clusterip", "web", "--tcp=80:8080", "-n", "team-a"],
        ["service", "web", "-n", "team-a"],
    ),
    (
        ["run", "p", "--image=busybox", "--restart=Never", "-n", "team-a", "--", "sleep", "1"],
        ["pod", "p", "-n", "team-a"],
    ),
    (
        ["create", "job", "hello", "--image=busybox", "-n", "team-a", "--", "echo", "hi"],
        ["job", "hello", "-n", "team-a"],
    ),
    (["create", "deployment", "web", "--image=nginx", "-n", "team-a"], ["deployment", "web", "-n", "team-a"]),
    (["create", "priorityclass", "high", "--value=0"], ["priorityclass", "high"]),
]


@pytest.fixture
def kubectl(cluster: LocalCluster, tmp_path: Path) -> Kubectl:
    return Kubectl(cluster, tmp_path / "kube-cache")


async def test_imperative_creates_store_what_kubectl_meant(kubectl: Kubectl, cluster: LocalCluster) -> None:
    await kubectl("api-resources")  # fills the discovery cache the parallel commands share
    dry_runs = await asyncio.gather(*(kubectl.json(*c, flags=("--dry-run=client",)) for c, _ in COMMANDS))
    await kubectl(*COMMANDS[0][0])  # the namespace first, then everything in it at once
    await asyncio.gather(*(kubectl(*create) for create, _ in COMMANDS[1:]))
    got = await asyncio.gather(*(kubectl.json("get", *get) for _, get in COMMANDS))
    stored = {get[0]: obj for (_, get), obj in zip(COMMANDS, got, strict=True)}
    for (_, get), intended in zip(COMMANDS, dry_runs, strict=True):
        intended.pop("status", None)  # a create ignores the status it is sent, as on a real server
        assert_contains(stored[get[0]], intended, get[0])
    # The bodies really came as protobuf (kubectl run is the one that posts JSON).
    posted = {r.path.rsplit("/", 1)[-1] for r in cluster.requests if r.content_type == MEDIA_TYPE}
    assert {"namespaces", "resourcequotas", "configmaps", "secrets", "jobs", "priorityclasses"} <= posted
    assert all(r.status == 201 for r in cluster.requests if r.content_type == MEDIA_TYPE)

    assert stored["quota"]["spec"] == {"hard": {"pods": "2", "requests.cpu": "1"}}
    assert stored["configmap"]["data"] == {"a": "b", "empty": ""}
    assert stored["secret"]["data"] == {"k": "dg=="} and stored["secret"]["type"] == "Opaque"
    assert stored["service"]["spec"]["ports"] == [
        {"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}
    ]
    [container] = stored["job"]["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["command"]) == ("busybox", ["echo", "hi"])
    # A zero that JSON never omits survives the protobuf path.
    assert stored["priorityclass"]["value"] == 0
    assert (await kubectl("auth", "can-i", "create", "jobs", "-n", "team-a")).strip() == "yes"


async def test_kubectl_drain_sends_protobuf_delete_options(
    kubectl: Kubectl, cluster: LocalCluster, tmp_path: Path
) -> None:
    node = tmp_path / "node.yaml"
    node.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    await kubectl("create", "-f", str(node))
    await kubectl("run", "p", "--image=busybox", "--overrides", '{"spec": {"nodeName": "n1"}}')
    await kubectl("drain", "n1", "--force", "--grace-period=0", "--timeout=20s")
    assert cluster.store.get("", "pods", "default", "p") is None
    [delete] = [r for r in cluster.requests if r.method == "DELETE" and r.path.endswith("/pods/p")]
    assert (delete.content_type, delete.status) == (MEDIA_TYPE, 200)


@pytest.fixture
async def simulated(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    config = dataclasses.replace(default_config(), default_runtime=0.2)
    async with LocalCluster(addons=default_addons(config, seed=1), bookmark_interval=0.2) as running:
        yield running


async def test_kubectl_create_job_runs_to_complete(simulated: LocalCluster, tmp_path: Path) -> None:
    kubectl = Kubectl(simulated, tmp_path / "kube-cache")
    out = await kubectl("create", "job", "hello", "--image=busybox", "--", "echo", "hi")
    assert out.strip() == "job.batch/hello created"
    out = await kubectl("wait", "--for=condition=Complete", "job/hello", "--timeout=30s")
    assert out.strip() == "job.batch/hello condition met"
    job = await kubectl.json("get", "job", "hello")
    assert job["status"]["succeeded"] == 1
    pods = await kubectl.json("get", "pods", "-l", "job-name=hello")
    assert [p["status"]["phase"] for p in pods["items"]] == ["Succeeded"]
