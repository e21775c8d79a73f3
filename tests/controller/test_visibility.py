"""kadmit's visibility server over HTTP: Kueue's documents, limit/offset, errors."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kadmit.controller.visibility import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    BadOptions,
    FrontProxyAuth,
    VisibilityAPI,
    limit_and_offset,
)
from kadmit.engine import Engine
from tests.engine.conftest import T0, cluster_queue, flavor, load, local_queue, quotas, workload


class Workloads:
    """What the server reads of the Workload informer: ``get(namespace, name)``."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects}

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((namespace or "", name))


def engine_with_pending() -> tuple[Engine, list[dict[str, Any]]]:
    engine = load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 1}})),
        local_queue("a", "cq"),
        local_queue("b", "cq"),
    )
    objects = []
    for i, queue in enumerate(["a", "b", "a", "b", "a"]):
        wl = workload(f"w{i}", queue, created=i, cpu="1")
        wl["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": f"job{i}", "uid": f"u{i}", "controller": True}
        ]
        engine.upsert(wl)
        objects.append(wl)
    engine.schedule(T0 + 10)  # w0 is admitted; w1..w4 wait
    return engine, objects


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    engine, objects = engine_with_pending()
    app = VisibilityAPI(engine, Workloads(*objects)).app()  # type: ignore[arg-type]
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


BASE = "/apis/visibility.kueue.x-k8s.io/v1beta2"


async def test_cluster_queue_summary_is_kueues_document(client: TestClient[Any, Any]) -> None:
    answer = await client.get(f"{BASE}/clusterqueues/cq/pendingworkloads")
    assert answer.status == 200
    summary = await answer.json()
    assert summary["kind"] == "PendingWorkloadsSummary"
    assert summary["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    assert summary["metadata"] == {"creationTimestamp": None}
    first = summary["items"][0]
    assert first == {
        "metadata": {
            "name": "w1",
            "namespace": "default",
            "creationTimestamp": "2026-01-01T00:00:01Z",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job1", "uid": "u1"}],
        },
        "priority": 0,
        "localQueueName": "b",
        "positionInClusterQueue": 0,
        "positionInLocalQueue": 0,
    }
    assert [(i["metadata"]["name"], i["positionInLocalQueue"]) for i in summary["items"]] == [
        ("w1", 0), ("w2", 0), ("w3", 1), ("w4", 1),
    ]  # fmt: skip


async def test_limit_offset_and_the_local_queue_view(client: TestClient[Any, Any]) -> None:
    page = await (await client.get(f"{BASE}/clusterqueues/cq/pendingworkloads?limit=2&offset=1")).json()
    assert [i["metadata"]["name"] for i in page["items"]] == ["w2", "w3"]
    local = await (await client.get(f"{BASE}/namespaces/default/localqueues/a/pendingworkloads")).json()
    positions = [
        (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
        for i in local["items"]
    ]
    assert positions == [("w2", 1, 0), ("w4", 3, 1)]
    page = await (
        await client.get(f"{BASE}/namespaces/default/localqueues/a/pendingworkloads?offset=1")
    ).json()
    assert [i["metadata"]["name"] for i in page["items"]] == ["w4"]
    v1 = await (
        await client.get("/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cq/pendingworkloads")
    ).json()
    assert v1["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1" and len(v1["items"]) == 4


async def test_errors_as_kueues_server_words_them(client: TestClient[Any, Any]) -> None:
    answer = await client.get(f"{BASE}/clusterqueues/nope/pendingworkloads")
    status = await answer.json()
    assert (answer.status, status["reason"]) == (404, "NotFound")
    assert status["message"] == 'clusterqueue.visibility.kueue.x-k8s.io "nope" not found'
    answer = await client.get(f"{BASE}/namespaces/other/localqueues/a/pendingworkloads")
    assert (await answer.json())["message"] == 'localqueue.visibility.kueue.x-k8s.io "a" not found'
    answer = await client.get(f"{BASE}/clusterqueues/cq/pendingworkloads?limit=many")
    status = await answer.json()
    assert (answer.status, status["reason"]) == (400, "BadRequest")
    assert status["message"] == 'limit: invalid value "many": must be an integer'
    assert (
        await client.get("/apis/visibility.kueue.x-k8s.io/v1alpha1/clusterqueues/cq/pendingworkloads")
    ).status == 404
    assert (await client.post(f"{BASE}/clusterqueues/cq/pendingworkloads")).status == 405


async def test_discovery_documents(client: TestClient[Any, Any]) -> None:
    groups = await (await client.get("/apis")).json()
    [group] = groups["groups"]
    assert group["name"] == "visibility.kueue.x-k8s.io"
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]
    resources = await (await client.get(BASE)).json()
    assert {r["name"]: (r["namespaced"], r["verbs"]) for r in resources["resources"]} == {
        "clusterqueues": (False, []),
        "clusterqueues/pendingworkloads": (False, ["get"]),
        "localqueues": (True, []),
        "localqueues/pendingworkloads": (True, ["get"]),
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, (DEFAULT_LIMIT, 0)),
        ({"limit": "0"}, (DEFAULT_LIMIT, 0)),  # Kueue's defaulting: 0 means the default
        ({"limit": "-3", "offset": "-1"}, (0, 0)),  # boundedLimitOffset
        ({"limit": str(MAX_LIMIT + 1), "offset": "7"}, (MAX_LIMIT, 7)),
    ],
)
def test_limit_and_offset_bounds(query: dict[str, str], expected: tuple[int, int]) -> None:
    assert limit_and_offset(query) == expected


def test_offset_must_be_an_integer() -> None:
    with pytest.raises(BadOptions, match='offset: invalid value "x"'):
        limit_and_offset({"offset": "x"})


async def test_queries_wait_for_the_caches() -> None:
    engine, objects = engine_with_pending()
    synced = False
    api = VisibilityAPI(engine, Workloads(*objects), synced=lambda: synced)  # type: ignore[arg-type]
    async with TestClient(TestServer(api.app())) as test_client:
        answer = await test_client.get(f"{BASE}/clusterqueues/cq/pendingworkloads")
        status = await answer.json()
        assert (answer.status, status["reason"]) == (503, "ServiceUnavailable")
        assert (await test_client.get(BASE)).status == 200  # discovery answers at once
        synced = True
        assert (await test_client.get(f"{BASE}/clusterqueues/cq/pendingworkloads")).status == 200


def test_the_front_proxy_ca_comes_from_the_api_servers_configmap() -> None:
    from kadmit.localcluster.tls import make_client_cert

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    auth = FrontProxyAuth(context)
    with pytest.raises(ValueError, match="no requestheader-client-ca-file"):
        auth.configure({"data": {}})
    assert not auth.loaded and context.verify_mode == ssl.CERT_NONE
    ca = make_client_cert("front-proxy-client").ca_pem.decode()
    auth.configure(
        {
            "data": {
                "requestheader-client-ca-file": ca,
                "requestheader-allowed-names": '["front-proxy-client"]',
            }
        }
    )
    assert auth.loaded and context.verify_mode == ssl.CERT_OPTIONAL
    assert auth.allowed_names == {"front-proxy-client"} and auth.username_headers == ("X-Remote-User",)


async def test_without_the_front_proxys_certificate_every_query_is_refused() -> None:
    engine, objects = engine_with_pending()
    auth = FrontProxyAuth(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    api = VisibilityAPI(engine, Workloads(*objects), auth=auth)  # type: ignore[arg-type]
    async with TestClient(TestServer(api.app())) as test_client:
        answer = await test_client.get(
            f"{BASE}/clusterqueues/cq/pendingworkloads", headers={"X-Remote-User": "me"}
        )
        assert (answer.status, (await answer.json())["reason"]) == (401, "Unauthorized")
        assert (await test_client.get(BASE)).status == 401
        assert (await test_client.get("/healthz")).status == 200
