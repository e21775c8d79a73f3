"""Deletion: finalizers and deletionTimestamp, propagation policies, garbage collection,
namespace deletion, and dryRun."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiException

from kadmit.localcluster.cluster import LocalCluster


def owned_by(
    owner: Any, kind: str, api_version: str = "v1", block: bool = False
) -> list[client.V1OwnerReference]:
    return [
        client.V1OwnerReference(
            api_version=api_version,
            kind=kind,
            name=owner.metadata.name,
            uid=owner.metadata.uid,
            block_owner_deletion=block,
        )
    ]


async def make_family(core: client.CoreV1Api) -> tuple[Any, list[str]]:
    owner = await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    names = []
    for i in range(2):
        child = client.V1Secret(
            metadata=client.V1ObjectMeta(name=f"child{i}", owner_references=owned_by(owner, "ConfigMap"))
        )
        names.append((await core.create_namespaced_secret("default", child)).metadata.name)
    return owner, names


async def test_finalizers_hold_the_object_until_removed(
    core: client.CoreV1Api, cluster: LocalCluster
) -> None:
    await core.create_namespaced_config_map(
        "default",
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="held", finalizers=["example.com/hold"])),
    )
    await core.delete_namespaced_config_map("held", "default")
    held = await core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_config_map(
            "held", "default", {"metadata": {"finalizers": ["example.com/hold", "x/y"]}}
        )
    assert caught.value.status == 422
    await core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as caught:
        await core.read_namespaced_config_map("held", "default")
    assert caught.value.status == 404


async def test_background_deletion_collects_dependents(core: client.CoreV1Api, cluster: LocalCluster) -> None:
    await make_family(core)
    await core.delete_namespaced_config_map("owner", "default", propagation_policy="Background")
    await asyncio.wait_for(cluster.settled(), 5)
    assert cluster.store.count("", "secrets", "default") == 0


async def test_foreground_deletion_waits_for_dependents(
    core: client.CoreV1Api, cluster: LocalCluster
) -> None:
    owner, _ = await make_family(core)
    blocker = client.V1Secret(
        metadata=client.V1ObjectMeta(
            name="slow",
            finalizers=["example.com/slow"],
            owner_references=owned_by(owner, "ConfigMap", block=True),
        )
    )
    await core.create_namespaced_secret("default", blocker)
    await core.delete_namespaced_config_map(
        "owner", "default", body=client.V1DeleteOptions(propagation_policy="Foreground")
    )
    await asyncio.wait_for(cluster.settled(), 5)
    waiting = await core.read_namespaced_config_map("owner", "default")
    assert waiting.metadata.deletion_timestamp and waiting.metadata.finalizers == ["foregroundDeletion"]
    assert [s.metadata.name for s in (await core.list_namespaced_secret("default")).items] == ["slow"]
    await core.patch_namespaced_secret("slow", "default", {"metadata": {"finalizers": None}})
    await asyncio.wait_for(cluster.settled(), 5)
    assert cluster.store.get("", "configmaps", "default", "owner") is None


async def test_orphan_deletion_keeps_dependents_without_owner(
    core: client.CoreV1Api, cluster: LocalCluster
) -> None:
    await make_family(core)
    await core.delete_namespaced_config_map("owner", "default", propagation_policy="Orphan")
    await asyncio.wait_for(cluster.settled(), 5)
    assert cluster.store.get("", "configmaps", "default", "owner") is None
    secrets = (await core.list_namespaced_secret("default")).items
    assert [s.metadata.name for s in secrets] == ["child0", "child1"]
    assert all(not s.metadata.owner_references for s in secrets)


async def test_jobs_orphan_their_pods_unless_told(
    core: client.CoreV1Api, batch: client.BatchV1Api, cluster: LocalCluster
) -> None:
    template = client.V1PodTemplateSpec(
        spec=client.V1PodSpec(
            restart_policy="Never", containers=[client.V1Container(name="c", image="busybox")]
        )
    )
    for name in ("a", "b"):
        job = await batch.create_namespaced_job(
            "default",
            client.V1Job(metadata=client.V1ObjectMeta(name=name), spec=client.V1JobSpec(template=template)),
        )
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(
                name=f"{name}-pod", owner_references=owned_by(job, "Job", "batch/v1")
            ),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="x")]),
        )
        await core.create_namespaced_pod("default", pod)
    await batch.delete_namespaced_job("a", "default")  # kubernetes-asyncio sends no policy: Orphan
    await batch.delete_namespaced_job("b", "default", propagation_policy="Background")  # as kubectl does
    await asyncio.wait_for(cluster.settled(), 5)
    assert [p.metadata.name for p in (await core.list_namespaced_pod("default")).items] == ["a-pod"]


async def test_dangling_owner_reference_is_collected(core: client.CoreV1Api, cluster: LocalCluster) -> None:
    ref = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="gone", uid="no-such-uid")
    await core.create_namespaced_secret(
        "default", client.V1Secret(metadata=client.V1ObjectMeta(name="s", owner_references=[ref]))
    )
    await asyncio.wait_for(cluster.settled(), 5)
    assert cluster.store.get("", "secrets", "default", "s") is None


async def test_deleting_a_namespace_deletes_its_contents(
    core: client.CoreV1Api, cluster: LocalCluster
) -> None:
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="doomed")))
    await core.create_namespaced_config_map(
        "doomed", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"))
    )
    await core.create_namespaced_config_map(
        "doomed",
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="held", finalizers=["example.com/hold"])),
    )
    await core.delete_namespace("doomed")
    await asyncio.wait_for(cluster.settled(), 5)
    ns = await core.read_namespace("doomed")
    assert ns.status.phase == "Terminating"
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_config_map(
            "doomed", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="new"))
        )
    assert caught.value.status == 403 and json.loads(caught.value.body)["reason"] == "Forbidden"
    await core.patch_namespaced_config_map("held", "doomed", {"metadata": {"finalizers": None}})
    await asyncio.wait_for(cluster.settled(), 5)
    with pytest.raises(ApiException) as caught:
        await core.read_namespace("doomed")
    assert caught.value.status == 404
    assert cluster.store.count("", "configmaps", "doomed") == 0


async def test_delete_options_body_and_dry_run(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"))
    )
    url = f"{cluster.url}/api/v1/namespaces/default/configmaps/a"
    async with aiohttp.ClientSession() as http:
        body = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "dryRun": ["All"],
            "propagationPolicy": "Background",
        }
        async with http.delete(url, json=body) as resp:
            assert resp.status == 200
        assert cluster.store.get("", "configmaps", "default", "a") is not None
        async with http.delete(url + "?dryRun=All") as resp:
            assert resp.status == 200
        assert cluster.store.get("", "configmaps", "default", "a") is not None
        async with http.delete(url, json={"propagationPolicy": "Sideways"}) as resp:
            assert resp.status == 422
        stale = {"preconditions": {"resourceVersion": "1"}}
        async with http.delete(url, json=stale) as resp:
            assert resp.status == 409
        async with http.delete(url, json={"kind": "DeleteOptions", "apiVersion": "v1"}) as resp:
            assert resp.status == 200
    assert cluster.store.get("", "configmaps", "default", "a") is None


async def test_delete_collection_with_selector(core: client.CoreV1Api, cluster: LocalCluster) -> None:
    for name, app in (("a", "x"), ("b", "x"), ("c", "y")):
        await core.create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels={"app": app}))
        )
    await core.delete_collection_namespaced_config_map("default", label_selector="app=x")
    assert [c.metadata.name for c in (await core.list_namespaced_config_map("default")).items] == ["c"]
