"""The aggregation layer: an APIService with a service reference makes the API server proxy its
group version there, list it in discovery, honour caBundle / insecureSkipTLSVerify, and answer
503 when the backend cannot be reached."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.discovery import AGGREGATED_V2
from kadmit.localcluster.objects import Obj
from tests.localcluster.conftest_admission import *  # noqa: F403
from tests.localcluster.conftest_admission import TLSMaterial

NAMESPACE, NAME = "kadmit-system", "kadmit-webhook-service"  # the name the test certificate is for
GROUP, VERSION = "example.kadmit.dev", "v1"
RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": f"{GROUP}/{VERSION}",
    "resources": [
        {"name": "things", "singularName": "thing", "namespaced": True, "kind": "Thing", "verbs": ["get"]},
        {
            "name": "things/summary",
            "singularName": "",
            "namespaced": True,
            "kind": "Summary",
            "verbs": ["get"],
        },
    ],
}


class Backend:
    """An aggregated API server: its discovery document, and an echo of what it was sent."""

    def __init__(self, tls: TLSMaterial) -> None:
        self.tls = tls
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self, port: int = 0, client_ca: str | None = None) -> None:
        """``client_ca``: ask for a client certificate and verify it against this CA (PEM)."""
        app = web.Application()
        app.router.add_get(f"/apis/{GROUP}/{VERSION}", self._discovery)
        app.router.add_route("*", "/{path:.*}", self._echo)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        context = self.tls.server_context()
        if client_ca is not None:
            context.load_verify_locations(cadata=client_ca)
            context.verify_mode = ssl.CERT_OPTIONAL
        site = web.TCPSite(self._runner, "127.0.0.1", port, ssl_context=context)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _discovery(self, _: web.Request) -> web.Response:
        return web.json_response(RESOURCES)

    async def _echo(self, request: web.Request) -> web.Response:
        seen = {
            "method": request.method,
            "path": request.path,
            "query": request.query_string,
            "body": (await request.read()).decode(),
            "host": request.headers.get("Host"),
            "user": request.headers.get("X-Remote-User"),
            "groups": request.headers.getall("X-Remote-Group", []),
            "authorization": request.headers.get("Authorization"),
            "client": _common_name(request),
        }
        return web.json_response(seen, status=201 if request.method == "POST" else 200)


def _common_name(request: web.Request) -> str | None:
    """The verified client certificate's common name (None: no certificate, or not verified)."""
    peer = request.transport.get_extra_info("peercert") if request.transport else None
    for rdn in (peer or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


@pytest.fixture
async def backend(tls: TLSMaterial) -> AsyncIterator[Backend]:
    server = Backend(tls)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(token="admin-token") as running:
        yield running


async def call(
    cluster: LocalCluster, method: str, path: str, body: Any = None, accept: str = "application/json"
) -> tuple[int, Any]:
    headers = {"Authorization": "Bearer admin-token", "Accept": accept}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, cluster.url + path, json=body, headers=headers) as answer,
    ):
        return answer.status, json.loads(await answer.read())


async def create(cluster: LocalCluster, path: str, body: Obj) -> None:
    code, answer = await call(cluster, "POST", path, body)
    assert code == 201, answer


def apiservice(**spec: Any) -> Obj:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{VERSION}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "version": VERSION,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
            "service": {"name": NAME, "namespace": NAMESPACE},
            **spec,
        },
    }


async def route(cluster: LocalCluster, port: int, *, endpoints: bool = True) -> None:
    """The Service (port 443) and, unless told not to, Endpoints to ``port`` on 127.0.0.1."""
    await create(cluster, "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    ports = [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8082}]
    await create(
        cluster,
        f"/api/v1/namespaces/{NAMESPACE}/services",
        {"metadata": {"name": NAME}, "spec": {"ports": ports}},
    )
    if endpoints:
        subsets = [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}]
        await create(
            cluster,
            f"/api/v1/namespaces/{NAMESPACE}/endpoints",
            {"metadata": {"name": NAME}, "subsets": subsets},
        )


APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
THING = f"/apis/{GROUP}/{VERSION}/namespaces/default/things/x"


async def test_requests_are_proxied_with_the_callers_identity_not_its_credentials(
    cluster: LocalCluster,
    backend: Backend,
    tls: TLSMaterial,
) -> None:
    code, _ = await call(cluster, "GET", THING)
    assert code == 404  # nothing claims the group yet
    await route(cluster, backend.port)
    await create(cluster, APISERVICES, apiservice(caBundle=tls.ca_bundle))

    code, seen = await call(cluster, "GET", THING + "/summary?limit=2&offset=1")
    assert code == 200
    assert seen["path"] == f"/apis/{GROUP}/{VERSION}/namespaces/default/things/x/summary"
    assert seen["query"] == "limit=2&offset=1"
    assert seen["host"] == f"{NAME}.{NAMESPACE}.svc:443"
    assert seen["user"] == "system:admin"
    assert "system:masters" in seen["groups"]
    assert seen["authorization"] is None

    code, seen = await call(cluster, "POST", THING, {"spec": 1})
    assert (code, seen["method"], json.loads(seen["body"])) == (201, "POST", {"spec": 1})

    code, _ = await call(cluster, "DELETE", f"{APISERVICES}/{VERSION}.{GROUP}")
    assert code == 200
    code, _ = await call(cluster, "GET", THING)
    assert code == 404  # unclaimed again


async def test_discovery_lists_the_aggregated_group_and_the_backends_resources(
    cluster: LocalCluster, backend: Backend
) -> None:
    await route(cluster, backend.port)
    await create(cluster, APISERVICES, apiservice(insecureSkipTLSVerify=True))
    second = apiservice(insecureSkipTLSVerify=True, versionPriority=10)
    second["metadata"]["name"] = f"v1beta1.{GROUP}"
    second["spec"]["version"] = "v1beta1"
    await create(cluster, APISERVICES, second)

    code, groups = await call(cluster, "GET", "/apis")
    [mine] = [g for g in groups["groups"] if g["name"] == GROUP]
    assert [v["version"] for v in mine["versions"]] == ["v1", "v1beta1"]
    assert mine["preferredVersion"]["version"] == "v1"
    code, group = await call(cluster, "GET", f"/apis/{GROUP}")
    assert (code, group["kind"], group["preferredVersion"]["groupVersion"]) == (
        200,
        "APIGroup",
        f"{GROUP}/v1",
    )
    code, resources = await call(cluster, "GET", f"/apis/{GROUP}/{VERSION}")
    assert (code, resources) == (200, RESOURCES)  # the backend's own answer

    code, aggregated = await call(cluster, "GET", "/apis", accept=AGGREGATED_V2)
    [item] = [i for i in aggregated["items"] if i["metadata"]["name"] == GROUP]
    v1 = item["versions"][0]
    assert v1["version"] == "v1" and v1["freshness"] == "Current"
    [things] = v1["resources"]
    assert (things["resource"], things["scope"], things["verbs"]) == ("things", "Namespaced", ["get"])
    assert [s["subresource"] for s in things["subresources"]] == ["summary"]

    await backend.stop()  # what was learnt stays listed, marked stale
    code, aggregated = await call(cluster, "GET", "/apis", accept=AGGREGATED_V2)
    [item] = [i for i in aggregated["items"] if i["metadata"]["name"] == GROUP]
    assert item["versions"][0]["freshness"] == "Stale"


async def test_an_unreachable_backend_is_a_clear_503(
    cluster: LocalCluster,
    backend: Backend,
    tls: TLSMaterial,
) -> None:
    await create(cluster, APISERVICES, apiservice(insecureSkipTLSVerify=True))
    code, status = await call(cluster, "GET", THING)
    assert (code, status["reason"]) == (503, "ServiceUnavailable")
    assert (
        status["message"] == f'service unavailable: APIService {VERSION}.{GROUP}: service "{NAME}" not found'
    )

    await route(cluster, backend.port, endpoints=False)
    code, status = await call(cluster, "GET", THING)
    assert code == 503 and status["message"].endswith(f'endpoints "{NAME}" not found'), status

    subsets = [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": backend.port}]}]
    await create(
        cluster, f"/api/v1/namespaces/{NAMESPACE}/endpoints", {"metadata": {"name": NAME}, "subsets": subsets}
    )
    code, _ = await call(cluster, "GET", THING)
    assert code == 200

    await backend.stop()
    code, status = await call(cluster, "GET", THING)
    assert code == 503, status
    assert status["message"].startswith(
        f"service unavailable: APIService {VERSION}.{GROUP}: dial tcp 127.0.0.1:"
    )
    assert "refused" in status["message"].lower()


async def test_the_ca_bundle_is_verified_for_the_service_name(
    cluster: LocalCluster,
    backend: Backend,
    tls: TLSMaterial,
) -> None:
    await route(cluster, backend.port)
    await create(cluster, APISERVICES, apiservice(caBundle=tls.other_ca_bundle))
    code, status = await call(cluster, "GET", THING)
    assert code == 503
    assert "tls: failed to verify certificate" in status["message"], status

    code, stored = await call(cluster, "GET", f"{APISERVICES}/{VERSION}.{GROUP}")
    stored["spec"]["caBundle"] = tls.ca_bundle
    code, _ = await call(cluster, "PUT", f"{APISERVICES}/{VERSION}.{GROUP}", stored)
    assert code == 200
    code, _ = await call(cluster, "GET", THING)
    assert code == 200


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            {"metadata": {"name": "v2.example.kadmit.dev"}},
            "metadata.name",
            'must be `spec.version+"."+spec.group`',
        ),
        ({"spec": {"versionPriority": 0}}, "spec.versionPriority", "must be positive and less than 1000"),
        (
            {"spec": {"groupPriorityMinimum": 20001}},
            "spec.groupPriorityMinimum",
            "must be positive and less than",
        ),
        (
            {"spec": {"insecureSkipTLSVerify": True, "caBundle": "Cg=="}},
            "spec.insecureSkipTLSVerify",
            "may not be true if caBundle is present",
        ),
        ({"spec": {"service": {"name": NAME}}}, "spec.service.namespace", "Required value"),
    ],
    ids=["name", "version-priority", "group-priority", "insecure-and-ca", "service-namespace"],
)
async def test_apiservices_are_validated_as_kube_aggregator_does(
    cluster: LocalCluster, change: Obj, field: str, message: str
) -> None:
    body = apiservice()
    body["metadata"].update(change.get("metadata", {}))
    body["spec"].update(change.get("spec", {}))
    code, status = await call(cluster, "POST", APISERVICES, body)
    assert (code, status["reason"]) == (422, "Invalid"), status
    [cause] = status["details"]["causes"]
    assert cause["field"] == field and message in cause["message"], cause


async def test_the_service_port_defaults_to_443(cluster: LocalCluster) -> None:
    await create(cluster, APISERVICES, apiservice())
    _, stored = await call(cluster, "GET", f"{APISERVICES}/{VERSION}.{GROUP}")
    assert stored["spec"]["service"] == {"name": NAME, "namespace": NAMESPACE, "port": 443}


async def test_the_available_condition_follows_the_backend(cluster: LocalCluster, backend: Backend) -> None:
    """kube-aggregator's AvailableConditionController: what ``kubectl get apiservices`` shows."""

    async def available() -> tuple[str, str, str]:
        await cluster.aggregator.check()
        _, stored = await call(cluster, "GET", f"{APISERVICES}/{VERSION}.{GROUP}")
        [condition] = [c for c in stored["status"]["conditions"] if c["type"] == "Available"]
        return condition["status"], condition["reason"], condition["message"]

    await create(cluster, APISERVICES, apiservice(insecureSkipTLSVerify=True))
    assert await available() == (
        "False",
        "ServiceNotFound",
        f'service/{NAME} in "{NAMESPACE}" is not present',
    )
    await route(cluster, backend.port, endpoints=False)
    assert (await available())[1] == "MissingEndpoints"
    subsets = [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": backend.port}]}]
    await create(
        cluster, f"/api/v1/namespaces/{NAMESPACE}/endpoints", {"metadata": {"name": NAME}, "subsets": subsets}
    )
    assert await available() == ("True", "Passed", "all checks passed")
    await backend.stop()
    value, reason, message = await available()
    assert (value, reason) == ("False", "FailedDiscoveryCheck")
    assert message.startswith(
        f"failing or missing response from https://127.0.0.1:{backend.port}/apis/{GROUP}/{VERSION}"
    )

    _, table = await call(
        cluster, "GET", APISERVICES, accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    )
    [row] = table["rows"]
    assert row["cells"][:3] == [f"{VERSION}.{GROUP}", f"{NAMESPACE}/{NAME}", "False (FailedDiscoveryCheck)"]


async def test_the_front_proxy_presents_the_client_certificate_it_publishes(
    cluster: LocalCluster, tls: TLSMaterial
) -> None:
    """An aggregated server verifies the proxy against requestheader-client-ca-file, as Kueue's does."""
    code, configmap = await call(
        cluster, "GET", "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
    )
    assert code == 200
    data = configmap["data"]
    assert json.loads(data["requestheader-allowed-names"]) == ["front-proxy-client"]
    assert json.loads(data["requestheader-username-headers"]) == ["X-Remote-User"]
    verifying = Backend(tls)
    await verifying.start(client_ca=data["requestheader-client-ca-file"])
    try:
        await route(cluster, verifying.port)
        await create(cluster, APISERVICES, apiservice(caBundle=tls.ca_bundle))
        code, seen = await call(cluster, "GET", THING)
        assert (code, seen["client"], seen["user"]) == (200, "front-proxy-client", "system:admin")
    finally:
        await verifying.stop()
