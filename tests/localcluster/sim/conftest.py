"""A LocalCluster running the simulated controllers, and helpers that wait on watches."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.watch import Watch

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.faults import FaultInjector
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.sim import default_addons
from kadmit.localcluster.sim.nodeconfig import NodeConfig, NodePool

TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def small_config(runtime: float = 0.05) -> NodeConfig:
    """Two CPU nodes in two zones (growable to 4) and one tainted GPU node (growable to 2)."""
    return NodeConfig(
        pools=(
            NodePool("cpu", ("cpu-0", "cpu-1"), 4, {"zone": "a"},
                     allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"}),
            NodePool("gpu", ("gpu-0",), 2, {"zone": "b", "gpus": "4"}, (TAINT,),
                     allocatable={"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4", "pods": "110"}),
        ),
        default_runtime=runtime,
    )


@pytest.fixture
def injector() -> FaultInjector:
    return FaultInjector(seed=1)


@pytest.fixture
async def cluster(injector: FaultInjector) -> AsyncIterator[LocalCluster]:
    addons = default_addons(small_config(), booking_expiry=0.6, seed=3)
    async with LocalCluster(addons=addons, middlewares=[injector.middleware]) as running:
        yield running


@pytest.fixture
async def api_client(cluster: LocalCluster) -> AsyncIterator[k8s.ApiClient]:
    api_client = await cluster.api_client()
    async with api_client:
        yield api_client


@pytest.fixture
def core(api_client: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api_client)


@pytest.fixture
def batch(api_client: k8s.ApiClient) -> k8s.BatchV1Api:
    return k8s.BatchV1Api(api_client)


@pytest.fixture
def custom(api_client: k8s.ApiClient) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api_client)


async def wait_for(
    list_call: Callable[..., Any], predicate: Callable[[Obj], bool], within: float = 10, **kwargs: Any
) -> Obj:
    """Watch ``list_call`` (initial state included) until an object satisfies ``predicate``."""
    async def watch() -> Obj:
        async with Watch(return_type="object") as watcher:
            async for event in watcher.stream(list_call, timeout_seconds=int(within) + 5, **kwargs):
                obj: Obj = event["raw_object"]
                if event["type"] != "DELETED" and predicate(obj):
                    return obj
        raise AssertionError("watch ended before the condition held")

    return await asyncio.wait_for(watch(), within)


def established(crd: Obj) -> bool:
    """A CustomResourceDefinition the server serves (``Established=True``)."""
    return any(
        c["type"] == "Established" and c["status"] == "True"
        for c in (crd.get("status") or {}).get("conditions") or []
    )


def condition(obj: Obj, kind: str) -> Obj | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def has_true(kind: str) -> Callable[[Obj], bool]:
    def check(obj: Obj) -> bool:
        found = condition(obj, kind)
        return found is not None and found["status"] == "True"

    return check


def job_manifest(name: str, *, parallelism: int = 1, completions: int | None = 1, runtime: str | None = None,
                 pod_spec: Obj | None = None, annotations: dict[str, str] | None = None, **spec: Any) -> Obj:
    template_annotations = dict(annotations or {})
    if runtime is not None:
        template_annotations["localcluster.kadmit.dev/runtime"] = runtime
    body: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": parallelism,
            "template": {
                "metadata": {"annotations": template_annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                    **(pod_spec or {}),
                },
            },
            **spec,
        },
    }
    if completions is not None:
        body["spec"]["completions"] = completions
    return body


async def wait_for_count(
    list_call: Callable[..., Any], count: int, within: float = 10, **kwargs: Any
) -> None:
    """List, then watch from the list's resourceVersion until exactly ``count`` objects match."""
    async def watch() -> None:
        listed = await list_call(**kwargs)
        names = {item.metadata.name for item in listed.items}
        if len(names) == count:
            return
        version = listed.metadata.resource_version
        async with Watch(return_type="object") as watcher:
            seconds = int(within) + 5
            stream = watcher.stream(list_call, resource_version=version, timeout_seconds=seconds, **kwargs)
            async for event in stream:
                name = event["raw_object"]["metadata"]["name"]
                if event["type"] == "DELETED":
                    names.discard(name)
                else:
                    names.add(name)
                if len(names) == count:
                    return
        raise AssertionError(f"watch ended with {len(names)} objects, not {count}")

    await asyncio.wait_for(watch(), within)
