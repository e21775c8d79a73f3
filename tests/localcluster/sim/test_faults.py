"""Each fault knob, as a kubernetes-asyncio client observes it.

The server here is a tiny aiohttp app speaking the list/watch wire format for ConfigMaps, so
the middleware is tested on its own; the end-to-end tests put it in front of a LocalCluster.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.watch import Watch

from kadmit.localcluster.faults import FaultInjector


def configmap(name: str, version: int) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": str(version)}}


async def configmaps(request: web.Request) -> web.StreamResponse:
    if request.query.get("watch", "").lower() in ("true", "1"):
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        start = int(request.query.get("resourceVersion") or 0)
        for version in range(start + 1, start + 200):
            event = {"type": "ADDED", "object": configmap(f"cm-{version}", version)}
            await response.write(json.dumps(event).encode() + b"\n")
            await asyncio.sleep(0.02)
        await response.write_eof()
        return response
    return web.json_response({"apiVersion": "v1", "kind": "ConfigMapList",
                              "metadata": {"resourceVersion": "7"}, "items": [configmap("cm-7", 7)]})


@pytest.fixture
def injector() -> FaultInjector:
    return FaultInjector(seed=7)


@pytest.fixture
async def api(injector: FaultInjector, aiohttp_server) -> AsyncIterator[k8s.CoreV1Api]:  # type: ignore[no-untyped-def]
    app = web.Application(middlewares=[injector.middleware])
    app.router.add_get("/api/v1/namespaces/{namespace}/configmaps", configmaps)
    server = await aiohttp_server(app)
    configuration = k8s.Configuration(host=str(server.make_url("")).rstrip("/"))
    async with k8s.ApiClient(configuration) as api_client:
        yield k8s.CoreV1Api(api_client)


async def test_failures_are_bounded_by_count(api: k8s.CoreV1Api, injector: FaultInjector) -> None:
    injector.fail(1.0, 500, for_requests=2)
    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            await api.list_namespaced_config_map("default")
        assert caught.value.status == 500
        assert json.loads(caught.value.body)["reason"] == "InternalError"
    listed = await api.list_namespaced_config_map("default")
    assert listed.metadata.resource_version == "7"
    assert injector.counts.by_status == {500: 2}


async def test_429_carries_retry_after(api: k8s.CoreV1Api, injector: FaultInjector) -> None:
    injector.fail(1.0, 429, for_requests=1, retry_after=3)
    with pytest.raises(ApiException) as caught:
        await api.list_namespaced_config_map("default")
    assert caught.value.status == 429
    assert caught.value.headers["Retry-After"] == "3"
    assert json.loads(caught.value.body)["details"] == {"retryAfterSeconds": 3}


async def test_seeded_failures_are_reproducible(aiohttp_server) -> None:  # type: ignore[no-untyped-def]
    patterns = []
    for _ in range(2):
        injector = FaultInjector(seed=42)
        app = web.Application(middlewares=[injector.middleware])
        app.router.add_get("/api/v1/namespaces/{namespace}/configmaps", configmaps)
        server = await aiohttp_server(app)
        injector.fail(0.5, 500, for_requests=100)
        pattern = []
        async with aiohttp.ClientSession() as session:
            for _ in range(20):
                async with session.get(server.make_url("/api/v1/namespaces/default/configmaps")) as response:
                    pattern.append(response.status)
        patterns.append(pattern)
        await server.close()
    assert patterns[0] == patterns[1]
    assert set(patterns[0]) == {200, 500}


async def test_failures_end_after_their_duration(api: k8s.CoreV1Api, injector: FaultInjector) -> None:
    injector.fail(1.0, 503, for_seconds=0.2)
    with pytest.raises(ApiException) as caught:
        await api.list_namespaced_config_map("default")
    assert caught.value.status == 503
    await asyncio.sleep(0.25)
    await api.list_namespaced_config_map("default")


async def test_latency_is_added_then_lifted(api: k8s.CoreV1Api, injector: FaultInjector) -> None:
    injector.delay(0.3, for_requests=1)
    started = time.monotonic()
    await api.list_namespaced_config_map("default")
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    await api.list_namespaced_config_map("default")
    assert time.monotonic() - started < 0.3


async def test_forced_gone_reaches_the_watcher_as_410(api: k8s.CoreV1Api, injector: FaultInjector) -> None:
    # kubernetes-asyncio retries a 410 once from the same resourceVersion, then raises it:
    # with two forced, the caller sees the 410 and must relist, as against a compacted server.
    injector.force_gone(2)
    watch = Watch()
    with pytest.raises(ApiException) as caught:
        async for _ in watch.stream(api.list_namespaced_config_map, "default", resource_version="3"):
            pass
    assert caught.value.status == 410
    assert "too old resource version: 3" in str(caught.value.reason)
    assert injector.counts.gone == 2


async def test_single_forced_gone_is_absorbed_by_the_retry(
    api: k8s.CoreV1Api, injector: FaultInjector
) -> None:
    injector.force_gone(1)
    watch = Watch()
    async for event in watch.stream(api.list_namespaced_config_map, "default", resource_version="3"):
        assert event["object"].metadata.name == "cm-4"
        break
    await watch.close()


async def test_dropped_watch_breaks_the_stream(api: k8s.CoreV1Api, injector: FaultInjector) -> None:
    watch = Watch()
    seen = 0
    with pytest.raises(aiohttp.ClientPayloadError):
        async for _ in watch.stream(api.list_namespaced_config_map, "default", resource_version="0",
                                    timeout_seconds=30):
            seen += 1
            if seen == 2:
                assert injector.drop_watches() == 1
    assert seen >= 2


async def test_paused_api_hangs_until_resumed(api: k8s.CoreV1Api, injector: FaultInjector) -> None:
    injector.pause(30, mode="hang")
    with pytest.raises(asyncio.TimeoutError):
        await api.list_namespaced_config_map("default", _request_timeout=0.3)
    injector.resume()
    listed = await api.list_namespaced_config_map("default", _request_timeout=2)
    assert listed.items[0].metadata.name == "cm-7"


async def test_refusing_pause_cuts_connections_and_expires(
    api: k8s.CoreV1Api, injector: FaultInjector
) -> None:
    injector.pause(0.3, mode="refuse")
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await api.list_namespaced_config_map("default")
    await asyncio.sleep(0.35)
    await api.list_namespaced_config_map("default")
    assert injector.counts.paused >= 1  # the client may retry a cut idempotent request once


async def test_every_knob_demands_a_bound(injector: FaultInjector) -> None:
    with pytest.raises(ValueError, match="bound"):
        injector.fail(0.5)
    with pytest.raises(ValueError, match="bound"):
        injector.delay(0.1)
    with pytest.raises(ValueError):
        injector.fail(0.5, 404, for_requests=1)
    with pytest.raises(ValueError):
        injector.pause(10_000)
    with pytest.raises(ValueError):
        injector.force_gone(0)
