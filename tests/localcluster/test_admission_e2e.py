"""Admission end to end: kubernetes-asyncio → LocalCluster → HTTPS webhooks / quota / conversion."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.objects import Obj
from tests.localcluster.conftest_admission import *  # noqa: F403
from tests.localcluster.conftest_admission import (
    TLSMaterial,
    WebhookServer,
    allow,
    convert_gadgets,
    deny,
    patch_response,
)

SERVICE = {"namespace": "kadmit-system", "name": "kadmit-webhook-service"}


@pytest.fixture
async def admitting_cluster(webhook_server: WebhookServer) -> AsyncIterator[LocalCluster]:
    resolver = {("kadmit-system", "kadmit-webhook-service", 443): ("127.0.0.1", webhook_server.port)}
    async with LocalCluster(service_resolver=resolver, bookmark_interval=0.2) as running:
        yield running


@pytest.fixture
async def kube(admitting_cluster: LocalCluster) -> AsyncIterator[Any]:
    api = await admitting_cluster.api_client()
    async with api:
        yield api


def job_webhook(kind: str, path: str, tls: TLSMaterial) -> Obj:
    """A webhook configuration shaped like kadmit's own (and Kueue's) Job webhooks."""
    operations = ["CREATE"] if kind == "Mutating" else ["CREATE", "UPDATE"]
    name = "mjob.kb.io" if kind == "Mutating" else "vjob.kb.io"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": f"{kind}WebhookConfiguration",
        "metadata": {
            "name": f"kadmit-{kind.lower()}-webhook-configuration",
            "labels": {"app.kubernetes.io/name": "kadmit"},
        },
        "webhooks": [
            {
                "name": name,
                "clientConfig": {"service": {**SERVICE, "path": path}, "caBundle": tls.ca_bundle},
                "rules": [
                    {
                        "operations": operations,
                        "apiGroups": ["batch"],
                        "apiVersions": ["v1"],
                        "resources": ["jobs"],
                    }
                ],
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system", "kadmit-system"],
                        }
                    ]
                },
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            }
        ],
    }


def status_of(error: ApiException) -> Obj:
    """The ``metav1.Status`` the API server answered with."""
    status: Obj = json.loads(error.body or b"{}")
    return status


def job(name: str) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
            }
        },
    }


def pod(name: str, cpu: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]
        },
    }


async def test_mutation_is_stored_and_denial_reaches_the_client(
    kube: Any, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route(
        "/mutate-batch-v1-job",
        patch_response(
            [{"op": "replace", "path": "/spec/suspend", "value": True}], warnings=["job suspended"]
        ),
    )
    webhook_server.route("/validate-batch-v1-job", allow())
    registration: Any = client.AdmissionregistrationV1Api(kube)
    await registration.create_mutating_webhook_configuration(
        job_webhook("Mutating", "/mutate-batch-v1-job", tls)
    )
    await registration.create_validating_webhook_configuration(
        job_webhook("Validating", "/validate-batch-v1-job", tls)
    )
    batch: Any = client.BatchV1Api(kube)

    await batch.create_namespaced_job("default", job("suspended"))

    stored = await batch.read_namespaced_job("suspended", "default")
    assert stored.spec.suspend is True
    validated = webhook_server.called("/validate-batch-v1-job")
    assert validated[-1]["request"]["object"]["spec"]["suspend"] is True, "validation sees the mutated object"

    webhook_server.route("/validate-batch-v1-job", deny("the queue user-queue does not exist"))
    with pytest.raises(ApiException) as denied:
        await batch.create_namespaced_job("default", job("rejected"))
    assert denied.value.status == 403
    body = status_of(denied.value)
    assert body["message"] == (
        'admission webhook "vjob.kb.io" denied the request: the queue user-queue does not exist'
    )
    with pytest.raises(ApiException) as missing:
        await batch.read_namespaced_job("rejected", "default")
    assert missing.value.status == 404


async def test_warnings_become_warning_headers(
    admitting_cluster: LocalCluster, kube: Any, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/mutate-batch-v1-job", allow(warnings=["spec.parallelism is ignored"]))
    registration: Any = client.AdmissionregistrationV1Api(kube)
    await registration.create_mutating_webhook_configuration(
        job_webhook("Mutating", "/mutate-batch-v1-job", tls)
    )

    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{admitting_cluster.url}/apis/batch/v1/namespaces/default/jobs", json=job("warned")
        ) as reply,
    ):
        assert reply.status == 201
        assert reply.headers.getall("Warning") == ['299 - "spec.parallelism is ignored"']


async def test_a_failing_webhook_is_a_500_and_nothing_is_stored(
    kube: Any, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    configuration = job_webhook("Validating", "/validate-batch-v1-job", tls)
    configuration["webhooks"][0]["clientConfig"]["caBundle"] = tls.other_ca_bundle
    registration: Any = client.AdmissionregistrationV1Api(kube)
    await registration.create_validating_webhook_configuration(configuration)
    batch: Any = client.BatchV1Api(kube)

    with pytest.raises(ApiException) as failed:
        await batch.create_namespaced_job("default", job("unverified"))

    assert failed.value.status == 500
    assert status_of(failed.value)["message"] == (
        'Internal error occurred: failed calling webhook "vjob.kb.io": failed to call webhook: '
        'Post "https://kadmit-webhook-service.kadmit-system.svc:443/validate-batch-v1-job?timeout=10s": '
        "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    )
    assert (await batch.list_namespaced_job("default")).items == []


async def test_quota_rejection_is_a_403_and_status_is_kept(kube: Any) -> None:
    core: Any = client.CoreV1Api(kube)
    await core.create_namespace({"metadata": {"name": "team-a"}})
    await core.create_namespaced_resource_quota(
        "team-a",
        {"metadata": {"name": "compute"}, "spec": {"hard": {"requests.cpu": "1", "pods": "5"}}},
    )
    await core.create_namespaced_pod("team-a", pod("first", "600m"))

    with pytest.raises(ApiException) as rejected:
        await core.create_namespaced_pod("team-a", pod("second", "500m"))

    assert rejected.value.status == 403
    body = status_of(rejected.value)
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        'pods "second" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, '
        "used: requests.cpu=600m, limited: requests.cpu=1"
    )
    quota = await core.read_namespaced_resource_quota("compute", "team-a")
    assert quota.status.hard == {"pods": "5", "requests.cpu": "1"}
    assert quota.status.used == {"pods": "1", "requests.cpu": "600m"}

    await core.delete_namespaced_pod("first", "team-a", grace_period_seconds=0)
    await core.create_namespaced_pod("team-a", pod("second", "500m"))
    quota = await core.read_namespaced_resource_quota("compute", "team-a")
    assert quota.status.used == {"pods": "1", "requests.cpu": "500m"}


def gadget_crd(tls: TLSMaterial) -> Obj:
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {"name": "v2", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}},
                {"name": "v1", "served": True, "storage": False, "schema": {"openAPIV3Schema": schema}},
            ],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"service": {**SERVICE, "path": "/convert"}, "caBundle": tls.ca_bundle},
                    "conversionReviewVersions": ["v1"],
                },
            },
        },
    }


async def test_custom_resources_are_converted_by_the_crds_webhook(
    kube: Any, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/convert", convert_gadgets)
    extensions: Any = client.ApiextensionsV1Api(kube)
    await extensions.create_custom_resource_definition(gadget_crd(tls))
    custom: Any = client.CustomObjectsApi(kube)

    created = await custom.create_namespaced_custom_object(
        "example.com",
        "v1",
        "default",
        "gadgets",
        {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"size": 3}},
    )
    assert created["apiVersion"] == "example.com/v1"
    assert created["spec"] == {"size": 3}

    stored = await custom.get_namespaced_custom_object("example.com", "v2", "default", "gadgets", "g")
    assert stored["spec"] == {"dimensions": {"size": 3}}
    assert webhook_server.called("/convert"), "the CRD's conversion webhook was called"


def gadget_webhook(kind: str, path: str, tls: TLSMaterial, match_policy: str) -> Obj:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": f"{kind}WebhookConfiguration",
        "metadata": {"name": f"gadgets-{kind.lower()}"},
        "webhooks": [
            {
                "name": f"{kind.lower()}.gadgets.example.com",
                "clientConfig": {"service": {**SERVICE, "path": path}, "caBundle": tls.ca_bundle},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": ["example.com"],
                        "apiVersions": ["v1"],
                        "resources": ["gadgets"],
                    }
                ],
                "matchPolicy": match_policy,
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }


async def test_equivalent_match_policy_sends_the_object_in_the_webhooks_version(
    kube: Any, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/convert", convert_gadgets)
    webhook_server.route(
        "/mutate-gadget",
        patch_response([{"op": "add", "path": "/metadata/labels", "value": {"seen-as": "v1"}}]),
    )
    webhook_server.route("/validate-gadget", allow())
    extensions: Any = client.ApiextensionsV1Api(kube)
    await extensions.create_custom_resource_definition(gadget_crd(tls))
    registration: Any = client.AdmissionregistrationV1Api(kube)
    await registration.create_mutating_webhook_configuration(
        gadget_webhook("Mutating", "/mutate-gadget", tls, "Equivalent")
    )
    await registration.create_validating_webhook_configuration(
        gadget_webhook("Validating", "/validate-gadget", tls, "Exact")
    )
    custom: Any = client.CustomObjectsApi(kube)

    created = await custom.create_namespaced_custom_object(
        "example.com",
        "v2",
        "default",
        "gadgets",
        {
            "apiVersion": "example.com/v2",
            "kind": "Gadget",
            "metadata": {"name": "g"},
            "spec": {"dimensions": {"size": 3}},
        },
    )

    [review] = webhook_server.called("/mutate-gadget")
    request = review["request"]
    assert request["kind"] == {"group": "example.com", "version": "v1", "kind": "Gadget"}
    assert request["requestKind"] == {"group": "example.com", "version": "v2", "kind": "Gadget"}
    assert request["resource"]["version"] == "v1"
    assert request["requestResource"]["version"] == "v2"
    assert request["object"]["apiVersion"] == "example.com/v1"
    assert request["object"]["spec"] == {"size": 3}
    assert created["apiVersion"] == "example.com/v2"
    assert created["metadata"]["labels"] == {"seen-as": "v1"}, "the patch made in v1 is kept"
    assert created["spec"] == {"dimensions": {"size": 3}}
    assert webhook_server.called("/validate-gadget") == [], "matchPolicy Exact does not match v2 requests"


async def test_concurrent_creations_never_exceed_a_quota(
    kube: Any, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    # A validating webhook on pods makes every creation wait on HTTP, interleaving them.
    webhook_server.route("/validate-pod", allow())
    configuration = job_webhook("Validating", "/validate-pod", tls)
    configuration["webhooks"][0]["rules"] = [
        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    ]
    registration: Any = client.AdmissionregistrationV1Api(kube)
    await registration.create_validating_webhook_configuration(configuration)
    core: Any = client.CoreV1Api(kube)
    await core.create_namespace({"metadata": {"name": "team-b"}})
    await core.create_namespaced_resource_quota(
        "team-b", {"metadata": {"name": "two-cpus"}, "spec": {"hard": {"requests.cpu": "2"}}}
    )

    outcomes = await asyncio.gather(
        *(core.create_namespaced_pod("team-b", pod(f"p{i}", "500m")) for i in range(10)),
        return_exceptions=True,
    )

    created = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
    rejected = [outcome for outcome in outcomes if isinstance(outcome, ApiException)]
    assert len(created) == 4
    assert len(rejected) == 6
    assert all(error.status == 403 for error in rejected)
    assert len(webhook_server.called("/validate-pod")) == 10
    quota = await core.read_namespaced_resource_quota("two-cpus", "team-b")
    assert quota.status.used == {"requests.cpu": "2"}


async def test_which_webhooks_match_follows_every_configuration_and_crd_change(
    kube: Any, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    """The server remembers which webhooks match each shape of request; every change of a webhook
    configuration or of a CRD's served versions must reach the very next request of that shape."""
    webhook_server.route("/convert", convert_gadgets)
    webhook_server.route("/validate-gadget", deny("no gadgets today"))
    extensions: Any = client.ApiextensionsV1Api(kube)
    crd = gadget_crd(tls)
    served_v2_only = [dict(v, served=v["name"] == "v2") for v in crd["spec"]["versions"]]
    crd["spec"]["versions"] = served_v2_only
    await extensions.create_custom_resource_definition(crd)
    custom: Any = client.CustomObjectsApi(kube)

    def gadget(name: str) -> Obj:
        return {"apiVersion": "example.com/v2", "kind": "Gadget", "metadata": {"name": name},
                "spec": {"dimensions": {"size": 1}}}

    await custom.create_namespaced_custom_object("example.com", "v2", "default", "gadgets", gadget("a"))
    registration: Any = client.AdmissionregistrationV1Api(kube)
    await registration.create_validating_webhook_configuration(
        gadget_webhook("Validating", "/validate-gadget", tls, "Equivalent")
    )
    # v1 is not served, so the v1 rule has no equivalent for a v2 request: not called yet.
    await custom.create_namespaced_custom_object("example.com", "v2", "default", "gadgets", gadget("b"))
    assert webhook_server.called("/validate-gadget") == []

    stored = await extensions.read_custom_resource_definition("gadgets.example.com")
    for version in stored.spec.versions:
        version.served = True
    await extensions.replace_custom_resource_definition("gadgets.example.com", stored)
    with pytest.raises(ApiException) as denied:
        await custom.create_namespaced_custom_object("example.com", "v2", "default", "gadgets", gadget("c"))
    assert denied.value.status == 403, "a v1 rule matches a v2 request once v1 is served again"

    await registration.delete_validating_webhook_configuration("gadgets-validating")
    await custom.create_namespaced_custom_object("example.com", "v2", "default", "gadgets", gadget("d"))
    assert len(webhook_server.called("/validate-gadget")) == 1
