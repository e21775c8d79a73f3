"""LocalCluster as a whole: the admission seam, default plugins, HTTPS with a token, add-ons,
middlewares, several clusters at once, recorded requests."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiException

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.interfaces import AdmissionError, AdmissionRequest, AdmissionResult, Endpoint


class Recorder:
    """An admission plugin that labels objects, denies names starting with "deny", and warns."""

    def __init__(self) -> None:
        self.seen: list[AdmissionRequest] = []

    async def mutate(self, request: AdmissionRequest) -> AdmissionResult:
        self.seen.append(request)
        if request.object is None or request.resource != "configmaps":
            return AdmissionResult(request.object)
        obj = dict(request.object)
        obj["metadata"] = dict(
            obj["metadata"], labels={**(obj["metadata"].get("labels") or {}), "mutated": "yes"}
        )
        return AdmissionResult(obj, warnings=["mutated by test"])

    async def validate(self, request: AdmissionRequest) -> list[str]:
        if request.name.startswith("deny"):
            raise AdmissionError(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": 'admission webhook "test" denied the request: no',
                    "reason": "Forbidden",
                    "code": 403,
                }
            )
        return ["validated by test"]


async def test_admission_plugins_mutate_validate_and_warn() -> None:
    plugin = Recorder()
    async with LocalCluster(admission_plugins=[plugin]) as cluster:
        url = f"{cluster.url}/api/v1/namespaces/default/configmaps"
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json={"metadata": {"name": "a"}}) as resp:
                body = await resp.json()
                assert resp.status == 201 and body["metadata"]["labels"] == {"mutated": "yes"}
                assert resp.headers.getall("Warning") == [
                    '299 - "mutated by test"',
                    '299 - "validated by test"',
                ]
            async with http.post(url, json={"metadata": {"name": "deny-me"}}) as resp:
                body = await resp.json()
                assert (
                    resp.status == 403
                    and body["message"] == 'admission webhook "test" denied the request: no'
                )
            async with http.post(url + "?dryRun=All", json={"metadata": {"name": "b"}}) as resp:
                assert resp.status == 201
            async with http.delete(url + "/a") as resp:
                assert resp.status == 200
        assert cluster.store.get("", "configmaps", "default", "b") is None
        ops = [(r.operation, r.name, r.dry_run) for r in plugin.seen if r.resource == "configmaps"]
        assert ops == [
            ("CREATE", "a", False),
            ("CREATE", "deny-me", False),
            ("CREATE", "b", True),
            ("DELETE", "a", False),
        ]
        delete = plugin.seen[-1]
        assert delete.object is None and delete.old_object is not None and delete.namespace == "default"


async def test_default_plugins_enforce_resource_quota() -> None:
    async with LocalCluster() as cluster:
        api = await cluster.api_client()
        async with api:
            core = client.CoreV1Api(api)
            quota = client.V1ResourceQuota(
                metadata=client.V1ObjectMeta(name="q"), spec=client.V1ResourceQuotaSpec(hard={"pods": "1"})
            )
            await core.create_namespaced_resource_quota("default", quota)
            spec = client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])
            await core.create_namespaced_pod(
                "default", client.V1Pod(metadata=client.V1ObjectMeta(name="p1"), spec=spec)
            )
            with pytest.raises(ApiException) as caught:
                await core.create_namespaced_pod(
                    "default", client.V1Pod(metadata=client.V1ObjectMeta(name="p2"), spec=spec)
                )
            assert caught.value.status == 403 and "exceeded quota" in json.loads(caught.value.body)["message"]


async def test_https_with_bearer_token(tmp_path: Any) -> None:
    async with LocalCluster(https=True, token=True, admission_plugins=[]) as cluster:
        assert cluster.url.startswith("https://") and cluster.token and cluster.ca_file
        api = await cluster.api_client()
        async with api:
            namespaces = await client.CoreV1Api(api).list_namespace()
            assert "default" in [n.metadata.name for n in namespaces.items]
        context = ssl.create_default_context(cafile=cluster.ca_file)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{cluster.url}/api/v1/namespaces", ssl=context) as resp:
                assert resp.status == 401 and (await resp.json())["reason"] == "Unauthorized"
            async with http.get(
                f"{cluster.url}/api/v1/namespaces", ssl=context, headers={"Authorization": "Bearer wrong"}
            ) as resp:
                assert resp.status == 401
            async with http.get(f"{cluster.url}/readyz", ssl=context) as resp:
                assert resp.status == 200


class Addon:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.endpoint: Endpoint | None = None

    async def start(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        async with aiohttp.ClientSession() as http, http.get(f"{endpoint.url}/version") as resp:
            self.events.append(f"start {resp.status}")

    async def stop(self) -> None:
        self.events.append("stop")


async def test_addons_and_middlewares() -> None:
    addon = Addon()
    seen: list[str] = []

    @web.middleware
    async def spy(request: web.Request, handler: Any) -> web.StreamResponse:
        seen.append(request.path)
        response: web.StreamResponse = await handler(request)
        return response

    async with LocalCluster(admission_plugins=[], addons=[addon], middlewares=[spy]) as cluster:
        assert addon.endpoint is not None and addon.endpoint.url == cluster.url
    assert addon.events == ["start 200", "stop"]
    assert seen == ["/version"]


async def test_several_clusters_are_independent() -> None:
    async with LocalCluster(admission_plugins=[]) as one, LocalCluster(admission_plugins=[]) as two:
        assert one.url != two.url
        async with aiohttp.ClientSession() as http:
            async with http.post(
                f"{one.url}/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "a"}}
            ):
                pass
            async with http.get(f"{two.url}/api/v1/namespaces/default/configmaps/a") as resp:
                assert resp.status == 404
        assert [(r.method, r.status) for r in one.requests] == [("POST", 201)]
        assert [(r.method, r.status) for r in two.requests] == [("GET", 404)]
        assert json.loads(one.requests[0].body) == {"metadata": {"name": "a"}}


class Slow:
    """Admission that yields to other requests, as a webhook call does."""

    async def mutate(self, request: AdmissionRequest) -> AdmissionResult:
        await asyncio.sleep(0.05)
        return AdmissionResult(request.object)

    async def validate(self, request: AdmissionRequest) -> list[str]:
        return []


async def test_concurrent_unconditional_patches_both_apply() -> None:
    async with LocalCluster(admission_plugins=[Slow()]) as cluster:
        api = await cluster.api_client()
        async with api:
            core = client.CoreV1Api(api)
            await core.create_namespaced_config_map(
                "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"))
            )
            await asyncio.gather(
                *(
                    core.patch_namespaced_config_map("a", "default", {"data": {f"k{i}": "v"}})
                    for i in range(5)
                )
            )
            final = await core.read_namespaced_config_map("a", "default")
            assert final.data == {f"k{i}": "v" for i in range(5)}
            stale = final.metadata.resource_version
            await core.patch_namespaced_config_map("a", "default", {"data": {"x": "y"}})
            with pytest.raises(ApiException) as caught:
                await core.patch_namespaced_config_map(
                    "a", "default", {"metadata": {"resourceVersion": stale}, "data": {"z": "1"}}
                )
            assert caught.value.status == 409
