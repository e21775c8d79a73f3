"""A webhook's ``clientConfig.service`` reached through the stored Service and Endpoints, as
kube-apiserver routes it when no resolver is given (a webhook server in another process)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.endpoints import EndpointsResolver, UnresolvableService
from kadmit.localcluster.objects import Obj
from tests.localcluster.conftest_admission import *  # noqa: F403
from tests.localcluster.conftest_admission import FakeStore, TLSMaterial, WebhookServer, deny

NAMESPACE, NAME = "kadmit-system", "kadmit-webhook-service"
NO_ENDPOINTS = f'no endpoints available for service "{NAME}"'


def service(port: int = 443, target: int | str = "webhook-server", port_name: str = "https",
            **spec: Any) -> Obj:
    ports = [{"name": port_name, "port": port, "protocol": "TCP", "targetPort": target}]
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {"ports": ports, **spec}}


def endpoints(port: int, *, port_name: str = "https", ready: bool = True, ip: str = "127.0.0.1") -> Obj:
    addresses = {"addresses" if ready else "notReadyAddresses": [{"ip": ip}]}
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": NAME, "namespace": NAMESPACE},
            "subsets": [{**addresses, "ports": [{"name": port_name, "port": port, "protocol": "TCP"}]}]}


def resolver(*objects: Obj) -> EndpointsResolver:
    store = FakeStore()
    for obj in objects:
        store.put("", {"Service": "services", "Endpoints": "endpoints"}[obj["kind"]], obj)
    return EndpointsResolver(store, random.Random(0))


def test_the_service_port_leads_to_the_endpoints_port_of_the_same_name() -> None:
    resolve = resolver(service(), endpoints(9443))
    assert resolve(NAMESPACE, NAME, 443) == ("127.0.0.1", 9443)


def test_unnamed_ports_match_each_other() -> None:
    resolve = resolver(service(port=8443, target=8443, port_name=""), endpoints(8443, port_name=""))
    assert resolve(NAMESPACE, NAME, 8443) == ("127.0.0.1", 8443)


def test_one_of_several_ready_addresses_is_called() -> None:
    many = endpoints(9443)
    many["subsets"][0]["addresses"] = [{"ip": "127.0.0.1"}, {"ip": "127.0.0.2"}]
    resolve = resolver(service(), many)
    assert {resolve(NAMESPACE, NAME, 443)[0] for _ in range(50)} == {"127.0.0.1", "127.0.0.2"}


@pytest.mark.parametrize(
    ("objects", "port", "reason"),
    [
        ((), 443, 'service "kadmit-webhook-service" not found'),
        ((service(),), 443, 'endpoints "kadmit-webhook-service" not found'),
        ((service(), endpoints(9443)), 444, f'no service port 444 found for service "{NAME}"'),
        ((service(), endpoints(9443, ready=False)), 443, NO_ENDPOINTS),
        ((service(), endpoints(9443, port_name="metrics")), 443, NO_ENDPOINTS),
        ((service(type="ExternalName", externalName="example.com"), endpoints(9443)), 443,
         'unsupported service type "ExternalName"'),
    ],
    ids=["no-service", "no-endpoints", "no-such-port", "none-ready", "port-name-differs", "external-name"],
)
def test_what_kube_apiserver_says_when_a_service_has_no_address(
    objects: tuple[Obj, ...], port: int, reason: str
) -> None:
    with pytest.raises(UnresolvableService) as failed:
        resolver(*objects)(NAMESPACE, NAME, port)
    assert str(failed.value) == reason


# -- through the API server, as a webhook server in another process is reached -------------------


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster() as running:  # no service_resolver: Services and Endpoints decide
        yield running


async def call(cluster: LocalCluster, method: str, path: str, body: Obj) -> tuple[int, Obj]:
    async with aiohttp.ClientSession() as session, session.request(method, cluster.url + path,
                                                                   json=body) as answer:
        return answer.status, await answer.json()


async def create(cluster: LocalCluster, path: str, body: Obj) -> Obj:
    code, answer = await call(cluster, "POST", path, body)
    assert code == 201, answer
    return answer


def validating_webhook(tls: TLSMaterial, name: str = NAME) -> Obj:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "configmaps"},
        "webhooks": [{
            "name": "configmaps.example.com",
            "clientConfig": {"service": {"namespace": NAMESPACE, "name": name, "path": "/validate"},
                             "caBundle": tls.ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    }


CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


async def test_a_webhook_is_called_at_its_endpoints_and_verified_as_its_service(
    cluster: LocalCluster, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/validate", deny("no settings today"))
    await create(cluster, "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    await create(cluster, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                 validating_webhook(tls))
    url = f"https://{NAME}.{NAMESPACE}.svc:443/validate?timeout=10s"

    code, status = await call(cluster, "POST", CONFIGMAPS, CONFIGMAP)
    assert (code, status["message"]) == (
        500, 'Internal error occurred: failed calling webhook "configmaps.example.com": '
             f'failed to call webhook: Post "{url}": service "{NAME}" not found')

    await create(cluster, f"/api/v1/namespaces/{NAMESPACE}/services", service())
    code, status = await call(cluster, "POST", CONFIGMAPS, CONFIGMAP)
    assert status["message"].endswith(f'Post "{url}": endpoints "{NAME}" not found'), status

    await create(cluster, f"/api/v1/namespaces/{NAMESPACE}/endpoints", endpoints(webhook_server.port))
    code, status = await call(cluster, "POST", CONFIGMAPS, CONFIGMAP)
    assert (code, status["message"]) == (
        403, 'admission webhook "configmaps.example.com" denied the request: no settings today')
    assert len(webhook_server.called("/validate")) == 1


async def test_tls_is_verified_against_the_service_name_not_the_endpoint_address(
    cluster: LocalCluster, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    """The serving certificate names kadmit-webhook-service.kadmit-system.svc: a Service of another
    name routed to the same server is refused, as on a cluster."""
    webhook_server.route("/validate", deny("never reached"))
    await create(cluster, "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    other = service()
    other["metadata"]["name"] = "impostor"
    route = endpoints(webhook_server.port)
    route["metadata"]["name"] = "impostor"
    await create(cluster, f"/api/v1/namespaces/{NAMESPACE}/services", other)
    await create(cluster, f"/api/v1/namespaces/{NAMESPACE}/endpoints", route)
    await create(cluster, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                 validating_webhook(tls, name="impostor"))
    code, status = await call(cluster, "POST", CONFIGMAPS, CONFIGMAP)
    assert code == 500
    assert status["message"].endswith("tls: failed to verify certificate: x509: "
                                      "certificate is not valid for impostor.kadmit-system.svc"), status
    assert webhook_server.called("/validate") == []
