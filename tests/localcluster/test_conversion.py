"""CRD conversion through a real HTTPS conversion webhook, and the checks on its answer."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kadmit.localcluster.conversion import ConversionError, convert_objects
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.webhookclient import WebhookClient
from tests.localcluster.conftest_admission import *  # noqa: F403
from tests.localcluster.conftest_admission import TLSMaterial, WebhookServer, conversion_webhook

V1BETA1 = "kueue.x-k8s.io/v1beta1"
V1BETA2 = "kueue.x-k8s.io/v1beta2"


def crd(ca_bundle: str, strategy: str = "Webhook") -> Obj:
    conversion: Obj = {"strategy": strategy}
    if strategy == "Webhook":
        conversion["webhook"] = {
            "clientConfig": {
                "service": {
                    "namespace": "kadmit-system",
                    "name": "kadmit-webhook-service",
                    "path": "/convert",
                },
                "caBundle": ca_bundle,
            },
            "conversionReviewVersions": ["v1"],
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusterqueues.kueue.x-k8s.io"},
        "spec": {
            "group": "kueue.x-k8s.io",
            "names": {"kind": "ClusterQueue", "plural": "clusterqueues"},
            "scope": "Cluster",
            "versions": [
                {"name": "v1beta1", "served": True},
                {"name": "v1beta2", "served": True, "storage": True},
            ],
            "conversion": conversion,
        },
    }


def cluster_queue(name: str, api_version: str = V1BETA1) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "7", "labels": {"team": "a"}},
        "spec": {"cohort": "all"} if api_version == V1BETA1 else {"cohortName": "all"},
    }


def _cohort_renamed(spec: Obj, desired: str) -> None:
    if "cohort" in spec:
        spec["cohortName"] = spec.pop("cohort")


def converter(change: Callable[[Obj], Obj] | None = None, **response: Any) -> Any:
    """A /convert handler that renames v1beta1 spec.cohort to v1beta2 spec.cohortName."""
    return conversion_webhook(_cohort_renamed, change, **response)


def resolver(server: WebhookServer) -> Callable[[str, str, int], tuple[str, int]]:
    return lambda namespace, name, port: ("127.0.0.1", server.port)


async def test_objects_are_converted_by_the_webhook(webhook_server: WebhookServer, tls: TLSMaterial) -> None:
    def relabel_and_tamper(obj: Obj) -> Obj:
        obj["metadata"]["labels"]["converted"] = "yes"
        obj["metadata"]["resourceVersion"] = "999"  # not the webhook's to change: restored
        return obj

    webhook_server.route("/convert", converter(relabel_and_tamper))
    originals = [cluster_queue("a"), cluster_queue("b", V1BETA2), cluster_queue("c")]
    snapshot = copy.deepcopy(originals)

    converted = await convert_objects(crd(tls.ca_bundle), originals, V1BETA2, resolver(webhook_server))

    assert originals == snapshot
    assert [obj["apiVersion"] for obj in converted] == [V1BETA2] * 3
    assert converted[0]["spec"] == {"cohortName": "all"}
    assert converted[0]["metadata"] == {
        "name": "a",
        "uid": "uid-a",
        "resourceVersion": "7",
        "labels": {"team": "a", "converted": "yes"},
    }
    assert converted[1] == originals[1], "an object already in the desired version is not sent"
    [review] = webhook_server.called("/convert")
    assert review["apiVersion"] == "apiextensions.k8s.io/v1"
    assert review["kind"] == "ConversionReview"
    assert review["request"]["desiredAPIVersion"] == V1BETA2
    assert [obj["metadata"]["name"] for obj in review["request"]["objects"]] == ["a", "c"]
    assert webhook_server.queries == ["timeout=30s"]


async def test_nothing_to_convert_makes_no_call(webhook_server: WebhookServer, tls: TLSMaterial) -> None:
    objects = [cluster_queue("a", V1BETA2)]

    assert await convert_objects(crd(tls.ca_bundle), objects, V1BETA2, resolver(webhook_server)) == objects
    assert webhook_server.calls == []


async def test_strategy_none_only_rewrites_the_api_version(tls: TLSMaterial) -> None:
    converted = await convert_objects(crd(tls.ca_bundle, "None"), [cluster_queue("a")], V1BETA2)

    assert converted[0]["apiVersion"] == V1BETA2
    assert converted[0]["spec"] == {"cohort": "all"}


async def test_a_shared_client_is_reused(webhook_server: WebhookServer, tls: TLSMaterial) -> None:
    webhook_server.route("/convert", converter())
    async with WebhookClient(resolver(webhook_server)) as client:
        for name in ("a", "b"):
            [converted] = await convert_objects(
                crd(tls.ca_bundle), [cluster_queue(name)], V1BETA2, client=client
            )
            assert converted["metadata"]["name"] == name
    assert len(webhook_server.calls) == 2


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (
            converter(result={"status": "Failure", "message": "cohort is gone"}),
            "conversion webhook for kueue.x-k8s.io/v1beta1, Kind=ClusterQueue failed: cohort is gone",
        ),
        (
            converter(result={"status": "Failure"}),
            "failed: response.result.status was 'Failure', not 'Success'",
        ),
        (converter(uid="other"), 'failed: expected response.uid="'),
        (
            converter(convertedObjects=[]),
            "conversion webhook for kueue.x-k8s.io/v1beta1, Kind=ClusterQueue returned 0 objects, expected 1",
        ),
        (
            converter(lambda obj: {**obj, "apiVersion": V1BETA1}),
            "returned invalid converted object at index 0: invalid groupVersion "
            "(expected kueue.x-k8s.io/v1beta2, received kueue.x-k8s.io/v1beta1)",
        ),
        (
            converter(lambda obj: {**obj, "kind": "LocalQueue"}),
            "invalid kind (expected ClusterQueue, received LocalQueue)",
        ),
        (
            converter(lambda obj: {**obj, "metadata": {**obj["metadata"], "name": "renamed"}}),
            "returned invalid converted object at index 0: must have the same name: a != renamed",
        ),
        (
            converter(lambda obj: {**obj, "metadata": {**obj["metadata"], "labels": {"n": 1}}}),
            "returned invalid metadata in object at index 0: labels must be a map of strings",
        ),
    ],
)
async def test_bad_answers_are_conversion_errors(
    webhook_server: WebhookServer, tls: TLSMaterial, handler: Any, expected: str
) -> None:
    webhook_server.route("/convert", handler)

    with pytest.raises(ConversionError) as failed:
        await convert_objects(crd(tls.ca_bundle), [cluster_queue("a")], V1BETA2, resolver(webhook_server))

    assert expected in failed.value.cause
    assert failed.value.status["code"] == 500
    assert failed.value.status["reason"] == "InternalError"
    assert failed.value.status["message"] == f"Internal error occurred: {failed.value.cause}"


async def test_wrong_ca_bundle_fails_the_conversion(webhook_server: WebhookServer, tls: TLSMaterial) -> None:
    webhook_server.route("/convert", converter())

    with pytest.raises(ConversionError) as failed:
        await convert_objects(
            crd(tls.other_ca_bundle), [cluster_queue("a")], V1BETA2, resolver(webhook_server)
        )

    assert failed.value.cause == (
        "conversion webhook for kueue.x-k8s.io/v1beta1, Kind=ClusterQueue failed: "
        'Post "https://kadmit-webhook-service.kadmit-system.svc:443/convert?timeout=30s": '
        "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    )
    assert webhook_server.calls == []


async def test_an_unserved_version_is_refused(tls: TLSMaterial) -> None:
    with pytest.raises(ConversionError) as failed:
        await convert_objects(crd(tls.ca_bundle), [cluster_queue("a")], "kueue.x-k8s.io/v2")
    assert failed.value.cause == '"kueue.x-k8s.io/v2" is not a version of ClusterQueue'
