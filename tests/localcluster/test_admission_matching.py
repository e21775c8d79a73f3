"""Which webhooks are called: rules, namespaceSelector, objectSelector and CEL matchConditions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from kadmit.localcluster.admission import WebhookAdmission, rule_matches
from kadmit.localcluster.interfaces import AdmissionError, AdmissionRequest
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.selectors import label_selector_matches
from tests.localcluster.conftest_admission import *  # noqa: F403
from tests.localcluster.conftest_admission import FakeStore, TLSMaterial, WebhookServer, allow, review_request

# The namespaceSelector of kadmit's (and Kueue's) Job webhooks.
MANAGED_NAMESPACES = {
    "matchExpressions": [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "kadmit-system"],
        }
    ]
}


def request(
    operation: str = "CREATE",
    group: str = "batch",
    resource: str = "jobs",
    subresource: str = "",
    namespace: str | None = "default",
    obj: Obj | None = None,
    old: Obj | None = None,
    name: str = "sample",
) -> AdmissionRequest:
    return review_request(
        resource, obj, old, operation=operation, group=group, version="v1", kind="Job",
        subresource=subresource, namespace=namespace, name=name,
    )


def labelled(labels: dict[str, str] | None = None, **metadata: Any) -> Obj:
    return {"metadata": {"name": "sample", "namespace": "default", "labels": dict(labels or {}), **metadata}}


def rule(**fields: Any) -> Obj:
    base: Obj = {
        "operations": ["CREATE"],
        "apiGroups": ["batch"],
        "apiVersions": ["v1"],
        "resources": ["jobs"],
    }
    base.update(fields)
    return base


@pytest.mark.parametrize(
    ("fields", "req", "expected"),
    [
        ({}, request(), True),
        ({}, request("UPDATE"), False),
        ({"operations": ["*"]}, request("DELETE"), True),
        ({"apiGroups": [""]}, request(), False),
        ({"apiGroups": ["*"]}, request(), True),
        ({"apiVersions": ["v2"]}, request(), False),
        ({}, request(subresource="status"), False),
        ({"resources": ["jobs/status"]}, request(subresource="status"), True),
        ({"resources": ["jobs/status"]}, request(), False),
        ({"resources": ["jobs/*"]}, request(subresource="status"), True),
        ({"resources": ["*"]}, request(resource="cronjobs"), True),
        ({"resources": ["*"]}, request(subresource="status"), False),
        ({"resources": ["*/*"]}, request(subresource="status"), True),
        ({"resources": ["*/status"]}, request(resource="cronjobs", subresource="status"), True),
        ({"scope": "Namespaced"}, request(), True),
        ({"scope": "Cluster"}, request(), False),
        ({"scope": "Cluster"}, request(namespace=None), True),
        ({"scope": "*"}, request(namespace=None), True),
        (
            {"apiGroups": [""], "resources": ["namespaces"], "scope": "Cluster"},
            request(group="", resource="namespaces", namespace="x"),
            True,
        ),
        (
            {"apiGroups": [""], "resources": ["namespaces"], "scope": "Namespaced"},
            request(group="", resource="namespaces", namespace="x"),
            False,
        ),
    ],
)
def test_rule_matching(fields: Obj, req: AdmissionRequest, expected: bool) -> None:
    assert rule_matches(rule(**fields), req) is expected


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
    ],
)
def test_label_selector(selector: Obj, labels: dict[str, str], expected: bool) -> None:
    assert label_selector_matches(selector, labels) is expected


@pytest.fixture
async def admission(store: FakeStore) -> AsyncIterator[WebhookAdmission]:
    plugin = WebhookAdmission(store)
    yield plugin
    await plugin.close()


def configure(store: FakeStore, server: WebhookServer, tls: TLSMaterial, **fields: Any) -> None:
    spec: Obj = {
        "name": "v.test",
        "clientConfig": {"url": server.url("/v"), "caBundle": tls.ca_bundle},
        "rules": [rule(operations=["*"])],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **fields,
    }
    store.put(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        {"metadata": {"name": "v"}, "webhooks": [spec]},
    )


async def test_namespace_selector_uses_the_namespace_labels_including_its_name(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/v", allow())
    configure(store, webhook_server, tls, namespaceSelector=MANAGED_NAMESPACES)
    store.put(
        "",
        "namespaces",
        {"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}}},
    )

    await admission.validate(request(namespace="kadmit-system", obj=labelled()))
    await admission.validate(request(namespace="kube-system", obj=labelled()))
    assert webhook_server.calls == []

    await admission.validate(request(namespace="team-a", obj=labelled()))
    await admission.validate(request(namespace="default", obj=labelled()))
    assert len(webhook_server.calls) == 2


async def test_namespace_selector_match_labels_and_cluster_scoped_objects(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/v", allow())
    configure(
        store,
        webhook_server,
        tls,
        namespaceSelector={"matchLabels": {"env": "prod"}},
        rules=[rule(operations=["*"], apiGroups=["*"], resources=["*"])],
    )
    store.put("", "namespaces", {"metadata": {"name": "prod", "labels": {"env": "prod"}}})
    store.put("", "namespaces", {"metadata": {"name": "dev", "labels": {"env": "dev"}}})

    await admission.validate(request(namespace="dev", obj=labelled()))
    assert webhook_server.calls == []
    await admission.validate(request(namespace="prod", obj=labelled()))
    assert len(webhook_server.calls) == 1
    # A cluster-scoped object is not subject to namespaceSelector...
    await admission.validate(
        request(group="kueue.x-k8s.io", resource="clusterqueues", namespace=None, obj={})
    )
    assert len(webhook_server.calls) == 2
    # ...but a Namespace is matched against its own labels.
    namespace = {"metadata": {"name": "new", "labels": {"env": "dev"}}}
    await admission.validate(
        request(group="", resource="namespaces", namespace=None, name="new", obj=namespace)
    )
    assert len(webhook_server.calls) == 2
    namespace["metadata"]["labels"] = {"env": "prod"}
    await admission.validate(
        request(group="", resource="namespaces", namespace=None, name="new", obj=namespace)
    )
    assert len(webhook_server.calls) == 3


async def test_object_selector_matches_object_or_old_object(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/v", allow())
    configure(store, webhook_server, tls, objectSelector={"matchLabels": {"managed": "true"}})

    await admission.validate(request(obj=labelled({"managed": "false"})))
    assert webhook_server.calls == []
    await admission.validate(request(obj=labelled({"managed": "true"})))
    await admission.validate(request("UPDATE", obj=labelled(), old=labelled({"managed": "true"})))
    await admission.validate(request("DELETE", obj=None, old=labelled({"managed": "true"})))
    assert len(webhook_server.calls) == 3


async def test_match_conditions_select_with_cel(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/v", allow())
    conditions = [
        {"name": "not-a-system-user", "expression": '!request.userInfo.username.startsWith("system:node:")'},
        {
            "name": "has-queue",
            "expression": 'has(object.metadata.labels) && "queue" in object.metadata.labels',
        },
        {"name": "create-or-update", "expression": 'request.operation in ["CREATE", "UPDATE"]'},
    ]
    configure(store, webhook_server, tls, matchConditions=conditions)

    await admission.validate(request(obj=labelled({"other": "x"})))
    assert webhook_server.calls == []
    await admission.validate(request(obj=labelled({"queue": "q"})))
    assert len(webhook_server.calls) == 1
    node = {"username": "system:node:n1", "groups": ["system:nodes"]}
    await admission.validate(replace(request(obj=labelled({"queue": "q"})), user=node))
    assert len(webhook_server.calls) == 1


async def test_match_condition_errors_fail_closed_or_open(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/v", allow())
    broken = [{"name": "missing-field", "expression": 'object.spec.queueName == "q"'}]
    configure(store, webhook_server, tls, matchConditions=broken)

    with pytest.raises(AdmissionError) as failed:
        await admission.validate(request(obj=labelled()))
    status = failed.value.status
    assert status["code"] == 403
    assert status["reason"] == "Forbidden"
    assert status["message"].startswith(
        "jobs.batch \"sample\" is forbidden: matchCondition 'missing-field': "
        "expression 'object.spec.queueName == \"q\"' resulted in error: "
    )

    configure(store, webhook_server, tls, matchConditions=broken, failurePolicy="Ignore")
    assert await admission.validate(request(obj=labelled())) == []
    assert webhook_server.calls == []

    # A false condition wins over an error: the webhook is simply not called.
    configure(
        store,
        webhook_server,
        tls,
        matchConditions=[*broken, {"name": "never", "expression": "false"}],
    )
    assert await admission.validate(request(obj=labelled())) == []
    assert webhook_server.calls == []


@pytest.fixture
def kadmit_webhook_configurations() -> list[Obj]:
    manifests = Path(__file__).resolve().parents[2] / "manifests" / "base" / "webhooks.yaml"
    return [document for document in yaml.safe_load_all(manifests.read_text()) if document]


async def test_kadmits_own_webhook_manifests_route_as_deployed(
    store: FakeStore,
    webhook_server: WebhookServer,
    tls: TLSMaterial,
    kadmit_webhook_configurations: list[Obj],
) -> None:
    for configuration in kadmit_webhook_configurations:
        for spec in configuration["webhooks"]:
            spec["clientConfig"]["caBundle"] = tls.ca_bundle
            webhook_server.route(spec["clientConfig"]["service"]["path"], allow())
        resource = configuration["kind"].lower() + "s"
        store.put("admissionregistration.k8s.io", resource, configuration)
    plugin = WebhookAdmission(store, lambda namespace, name, port: ("127.0.0.1", webhook_server.port))

    def paths() -> list[str]:
        called = sorted({path for path, _ in webhook_server.calls})
        webhook_server.calls.clear()
        return called

    try:
        for namespace in ("default", "kadmit-system"):
            job = request(namespace=namespace, obj=labelled())
            await plugin.mutate(job)
            await plugin.validate(job)
            expected = ["/mutate-batch-v1-job", "/validate-batch-v1-job"] if namespace == "default" else []
            assert paths() == expected, namespace
        update = request("UPDATE", obj=labelled(), old=labelled())
        await plugin.mutate(update)
        await plugin.validate(update)
        assert paths() == ["/validate-batch-v1-job"]
        cluster_queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "spec": {}}
        queue = review_request("clusterqueues", {**cluster_queue, "metadata": {"name": "cq"}})
        await plugin.mutate(queue)
        await plugin.validate(queue)
        assert paths() == [
            "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
            "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        ]
    finally:
        await plugin.close()
