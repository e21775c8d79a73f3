"""Webhook admission against real HTTPS webhook servers: calls, policies, messages."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from kadmit.localcluster.admission import ADMISSION_GROUP, VALIDATING, WebhookAdmission
from kadmit.localcluster.interfaces import AdmissionError, AdmissionRequest
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.store import Store
from tests.localcluster.conftest_admission import *  # noqa: F403
from tests.localcluster.conftest_admission import (
    SERVICE_DNS,
    FakeStore,
    Handler,
    TLSMaterial,
    WebhookServer,
    allow,
    convert_gadgets,
    deny,
    patch_response,
    review_request,
)

JOB_RULE = {
    "operations": ["CREATE", "UPDATE"],
    "apiGroups": ["batch"],
    "apiVersions": ["v1"],
    "resources": ["jobs"],
}


def job(name: str = "sample", namespace: str = "default", labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {"suspend": False, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }


def job_request(
    operation: str = "CREATE",
    obj: Obj | None = None,
    old: Obj | None = None,
    namespace: str = "default",
    dry_run: bool = False,
    subresource: str = "",
) -> AdmissionRequest:
    return review_request(
        "jobs", obj, old, operation=operation, namespace=namespace, subresource=subresource, dry_run=dry_run
    )


def webhook(name: str, client_config: Obj, **fields: Any) -> Obj:
    spec: Obj = {
        "name": name,
        "clientConfig": client_config,
        "rules": [JOB_RULE],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    spec.update(fields)
    return spec


def configure(store: FakeStore, kind: str, name: str, *webhooks: Obj) -> None:
    resource = "mutatingwebhookconfigurations" if kind == "mutating" else "validatingwebhookconfigurations"
    store.put(
        "admissionregistration.k8s.io",
        resource,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration"
            if kind == "mutating"
            else "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": list(webhooks),
        },
    )


def url_config(server: WebhookServer, path: str, ca_bundle: str) -> Obj:
    return {"url": server.url(path), "caBundle": ca_bundle}


@pytest.fixture
async def admission(store: FakeStore, webhook_server: WebhookServer) -> AsyncIterator[WebhookAdmission]:
    def resolve(namespace: str, name: str, port: int) -> tuple[str, int]:
        if (namespace, name, port) == ("kadmit-system", "kadmit-webhook-service", 443):
            return ("127.0.0.1", webhook_server.port)
        raise LookupError(f'no endpoints available for service "{name}"')

    plugin = WebhookAdmission(store, resolve)
    yield plugin
    await plugin.close()


async def test_mutation_is_applied_and_review_is_shaped_like_the_api_servers(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route(
        "/mutate",
        patch_response(
            [
                {"op": "replace", "path": "/spec/suspend", "value": True},
                {"op": "add", "path": "/metadata/labels/queued", "value": "yes"},
            ],
            warnings=["suspended by the webhook"],
        ),
    )
    configure(store, "mutating", "m", webhook("m.test", url_config(webhook_server, "/mutate", tls.ca_bundle)))
    original = job()

    result = await admission.mutate(job_request(obj=original))

    assert result.object is not None
    assert result.object["spec"]["suspend"] is True
    assert result.object["metadata"]["labels"] == {"queued": "yes"}
    assert original["spec"]["suspend"] is False, "the caller's object must not be modified in place"
    assert result.warnings == ["suspended by the webhook"]
    [review] = webhook_server.called("/mutate")
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    request = review["request"]
    assert request["kind"] == {"group": "batch", "version": "v1", "kind": "Job"}
    assert request["resource"] == {"group": "batch", "version": "v1", "resource": "jobs"}
    assert request["requestKind"] == request["kind"]
    assert request["requestResource"] == request["resource"]
    assert "subResource" not in request
    assert request["name"] == "sample"
    assert request["namespace"] == "default"
    assert request["operation"] == "CREATE"
    assert request["userInfo"]["username"] == "system:admin"
    assert request["object"] == original
    assert request["oldObject"] is None
    assert request["dryRun"] is False
    assert request["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert len(request["uid"]) == 36
    assert webhook_server.queries == ["timeout=10s"]


async def test_denial_returns_the_webhooks_status_and_message(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/validate", deny("the queue-name label is immutable", code=422, reason="Invalid"))
    configure(
        store, "validating", "v", webhook("v.test", url_config(webhook_server, "/validate", tls.ca_bundle))
    )

    with pytest.raises(AdmissionError) as denied:
        await admission.validate(job_request("UPDATE", obj=job(), old=job()))

    status = denied.value.status
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    assert status["status"] == "Failure"
    assert status["kind"] == "Status"
    assert (
        status["message"]
        == 'admission webhook "v.test" denied the request: the queue-name label is immutable'
    )


async def test_denial_without_code_or_message_is_403_without_explanation(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    async def bare_denial(review: Obj) -> Obj:
        return {"allowed": False}

    webhook_server.route("/validate", bare_denial)
    configure(
        store, "validating", "v", webhook("v.test", url_config(webhook_server, "/validate", tls.ca_bundle))
    )

    with pytest.raises(AdmissionError) as denied:
        await admission.validate(job_request(obj=job()))

    assert denied.value.status["code"] == 403
    assert (
        denied.value.status["message"] == 'admission webhook "v.test" denied the request without explanation'
    )


async def test_wrong_ca_bundle_is_a_failed_call(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/mutate", allow())
    configure(
        store, "mutating", "m", webhook("m.test", url_config(webhook_server, "/mutate", tls.other_ca_bundle))
    )

    with pytest.raises(AdmissionError) as failed:
        await admission.mutate(job_request(obj=job()))

    status = failed.value.status
    url = webhook_server.url("/mutate")
    cause = (
        f'failed calling webhook "m.test": failed to call webhook: Post "{url}?timeout=10s": '
        "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    )
    assert status["code"] == 500
    assert status["reason"] == "InternalError"
    assert status["message"] == f"Internal error occurred: {cause}"
    assert status["details"] == {"causes": [{"message": cause}]}
    assert webhook_server.calls == []


async def test_failure_policy_ignore_skips_a_failed_webhook_and_fail_rejects(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    refused = {"url": "https://127.0.0.1:1/nothing-listens-here", "caBundle": tls.ca_bundle}
    configure(store, "validating", "v", webhook("v.test", refused, failurePolicy="Ignore"))

    assert await admission.validate(job_request(obj=job())) == []

    configure(store, "validating", "v", webhook("v.test", refused, failurePolicy="Fail"))
    with pytest.raises(AdmissionError) as failed:
        await admission.validate(job_request(obj=job()))
    assert failed.value.status["code"] == 500
    assert failed.value.status["message"].endswith(
        'Post "https://127.0.0.1:1/nothing-listens-here?timeout=10s": '
        "dial tcp 127.0.0.1:1: connect: connection refused"
    )


async def test_failure_policy_defaults_to_fail(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    configure(
        store, "mutating", "m", webhook("m.test", url_config(webhook_server, "/missing", tls.ca_bundle))
    )

    with pytest.raises(AdmissionError) as failed:
        await admission.mutate(job_request(obj=job()))

    assert failed.value.status["code"] == 500
    assert failed.value.status["message"].endswith(
        "failed to call webhook: the server could not find the requested resource"
    )


async def test_timeout_is_honoured(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    async def slow(review: Obj) -> Obj:
        await asyncio.sleep(5)
        return {"allowed": True}

    webhook_server.route("/slow", slow)
    configure(
        store,
        "validating",
        "v",
        webhook("slow.test", url_config(webhook_server, "/slow", tls.ca_bundle), timeoutSeconds=1),
    )

    started = time.monotonic()
    with pytest.raises(AdmissionError) as failed:
        await admission.validate(job_request(obj=job()))
    elapsed = time.monotonic() - started

    assert 0.9 <= elapsed < 4, "the call must end at timeoutSeconds, not when the webhook answers"
    assert failed.value.status["message"] == (
        'Internal error occurred: failed calling webhook "slow.test": failed to call webhook: '
        f'Post "{webhook_server.url("/slow")}?timeout=1s": context deadline exceeded'
    )
    assert webhook_server.queries == ["timeout=1s"]


async def test_service_reference_is_resolved_and_verified_against_the_service_dns_name(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route(
        "/mutate-batch-v1-job", patch_response([{"op": "add", "path": "/spec/x", "value": 1}])
    )
    service = {"namespace": "kadmit-system", "name": "kadmit-webhook-service", "path": "/mutate-batch-v1-job"}
    configure(
        store,
        "mutating",
        "kadmit-mutating-webhook-configuration",
        webhook("mjob.kb.io", {"service": service, "caBundle": tls.ca_bundle}),
    )

    result = await admission.mutate(job_request(obj=job()))

    assert result.object is not None and result.object["spec"]["x"] == 1
    assert len(webhook_server.called("/mutate-batch-v1-job")) == 1


async def test_unresolvable_service_fails_with_the_resolvers_reason(
    admission: WebhookAdmission, store: FakeStore, tls: TLSMaterial
) -> None:
    service = {"namespace": "kadmit-system", "name": "gone", "path": "/mutate-batch-v1-job"}
    configure(store, "mutating", "m", webhook("mjob.kb.io", {"service": service, "caBundle": tls.ca_bundle}))

    with pytest.raises(AdmissionError) as failed:
        await admission.mutate(job_request(obj=job()))

    assert failed.value.status["message"] == (
        'Internal error occurred: failed calling webhook "mjob.kb.io": failed to call webhook: '
        'Post "https://gone.kadmit-system.svc:443/mutate-batch-v1-job?timeout=10s": '
        'no endpoints available for service "gone"'
    )


async def test_certificate_for_another_name_is_rejected(
    store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/v", allow())
    # The certificate names kadmit-webhook-service.kadmit-system.svc, not other.kadmit-system.svc.
    plugin = WebhookAdmission(store, lambda namespace, name, port: ("127.0.0.1", webhook_server.port))
    service = {"namespace": "kadmit-system", "name": "other", "path": "/v"}
    configure(store, "validating", "v", webhook("v.test", {"service": service, "caBundle": tls.ca_bundle}))
    try:
        with pytest.raises(AdmissionError) as failed:
            await plugin.validate(job_request(obj=job()))
    finally:
        await plugin.close()
    assert "x509: certificate is not valid for other.kadmit-system.svc" in failed.value.status["message"]
    assert SERVICE_DNS not in failed.value.status["message"]


async def test_invalid_responses_are_failed_calls(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    async def wrong_uid(review: Obj) -> Obj:
        return {"uid": "not-the-uid", "allowed": True}

    async def server_error(review: Obj) -> web.StreamResponse:
        return web.Response(status=500, text="boom")

    async def patch_without_type(review: Obj) -> Obj:
        return {"allowed": True, "patch": "W10="}

    cases: dict[str, tuple[Handler, str]] = {
        "/uid": (wrong_uid, 'received invalid webhook response: expected response.uid="'),
        "/500": (server_error, 'failed to call webhook: an error on the server ("boom") has prevented'),
        "/notype": (patch_without_type, "webhook returned response.patch but not response.patchType"),
    }
    for path, (handler, expected) in cases.items():
        webhook_server.route(path, handler)
        configure(store, "mutating", "m", webhook("m.test", url_config(webhook_server, path, tls.ca_bundle)))
        with pytest.raises(AdmissionError) as failed:
            await admission.mutate(job_request(obj=job()))
        assert failed.value.status["code"] == 500
        assert expected in failed.value.status["message"], path

        configure(
            store,
            "mutating",
            "m",
            webhook("m.test", url_config(webhook_server, path, tls.ca_bundle), failurePolicy="Ignore"),
        )
        result = await admission.mutate(job_request(obj=job()))
        assert result.object == job(), path


async def test_validating_webhook_may_not_patch(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/v", patch_response([{"op": "add", "path": "/spec/x", "value": 1}]))
    configure(store, "validating", "v", webhook("v.test", url_config(webhook_server, "/v", tls.ca_bundle)))

    with pytest.raises(AdmissionError) as failed:
        await admission.validate(job_request(obj=job()))

    assert "validating webhook may not return response.patch" in failed.value.status["message"]


async def test_a_patch_that_does_not_apply_is_an_internal_error_whatever_the_policy(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/m", patch_response([{"op": "replace", "path": "/spec/absent/deep", "value": 1}]))
    configure(
        store,
        "mutating",
        "m",
        webhook("m.test", url_config(webhook_server, "/m", tls.ca_bundle), failurePolicy="Ignore"),
    )

    with pytest.raises(AdmissionError) as failed:
        await admission.mutate(job_request(obj=job()))

    assert failed.value.status["code"] == 500
    assert "unable to apply the webhook's JSONPatch" in failed.value.status["message"]


async def test_mutating_webhooks_run_in_configuration_name_order_then_list_order(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    def appender(tag: str) -> Any:
        def ops(review: Obj) -> list[Obj]:
            seen = review["request"]["object"]["metadata"].get("annotations", {}).get("order", "")
            value = f"{seen},{tag}" if seen else tag
            return [{"op": "add", "path": "/metadata/annotations", "value": {"order": value}}]

        return patch_response(ops)

    for tag in ("a1", "a2", "b1"):
        webhook_server.route(f"/{tag}", appender(tag))
    configure(
        store, "mutating", "b-config", webhook("b1.test", url_config(webhook_server, "/b1", tls.ca_bundle))
    )
    configure(
        store,
        "mutating",
        "a-config",
        webhook("a1.test", url_config(webhook_server, "/a1", tls.ca_bundle)),
        webhook("a2.test", url_config(webhook_server, "/a2", tls.ca_bundle)),
    )

    result = await admission.mutate(job_request(obj=job()))

    assert result.object is not None
    assert result.object["metadata"]["annotations"]["order"] == "a1,a2,b1"


async def test_reinvocation_if_needed_runs_an_earlier_webhook_again_once(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    async def defaults_label(review: Obj) -> Obj | web.StreamResponse:
        labels = review["request"]["object"]["metadata"].get("labels") or {}
        if labels.get("seen-by-first") == "yes":
            return {"allowed": True}
        return await patch_response(
            [{"op": "add", "path": "/metadata/labels/seen-by-first", "value": "yes"}]
        )(review)

    webhook_server.route("/first", defaults_label)
    webhook_server.route(
        "/second", patch_response([{"op": "add", "path": "/metadata/labels/late", "value": "1"}])
    )
    configure(
        store,
        "mutating",
        "a",
        webhook(
            "first.test", url_config(webhook_server, "/first", tls.ca_bundle), reinvocationPolicy="IfNeeded"
        ),
    )
    configure(
        store, "mutating", "b", webhook("second.test", url_config(webhook_server, "/second", tls.ca_bundle))
    )

    result = await admission.mutate(job_request(obj=job()))

    assert result.object is not None
    assert result.object["metadata"]["labels"] == {"seen-by-first": "yes", "late": "1"}
    first_calls = webhook_server.called("/first")
    assert len(first_calls) == 2
    assert first_calls[1]["request"]["object"]["metadata"]["labels"]["late"] == "1"
    assert len(webhook_server.called("/second")) == 1, "only IfNeeded webhooks are reinvoked"


async def test_without_reinvocation_policy_each_webhook_runs_once(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/first", allow())
    webhook_server.route(
        "/second", patch_response([{"op": "add", "path": "/metadata/labels/late", "value": "1"}])
    )
    configure(
        store, "mutating", "a", webhook("first.test", url_config(webhook_server, "/first", tls.ca_bundle))
    )
    configure(
        store, "mutating", "b", webhook("second.test", url_config(webhook_server, "/second", tls.ca_bundle))
    )

    await admission.mutate(job_request(obj=job()))

    assert len(webhook_server.called("/first")) == 1
    assert len(webhook_server.called("/second")) == 1


async def test_side_effects_and_dry_run(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/v", allow())
    configure(
        store,
        "validating",
        "v",
        webhook("v.test", url_config(webhook_server, "/v", tls.ca_bundle), sideEffects="Some"),
    )

    with pytest.raises(AdmissionError) as rejected:
        await admission.validate(job_request(obj=job(), dry_run=True))
    assert rejected.value.status["code"] == 400
    assert rejected.value.status["reason"] == "BadRequest"
    assert rejected.value.status["message"] == 'admission webhook "v.test" does not support dry run'
    assert webhook_server.calls == []

    assert await admission.validate(job_request(obj=job())) == []
    assert len(webhook_server.calls) == 1

    configure(
        store,
        "validating",
        "v",
        webhook("v.test", url_config(webhook_server, "/v", tls.ca_bundle), sideEffects="NoneOnDryRun"),
    )
    await admission.validate(job_request(obj=job(), dry_run=True))
    assert webhook_server.calls[-1][1]["request"]["dryRun"] is True


async def test_warnings_from_validating_webhooks_are_returned(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/v1", allow(warnings=["first warning"]))
    webhook_server.route("/v2", allow(warnings=["second warning"]))
    configure(
        store,
        "validating",
        "v",
        webhook("v1.test", url_config(webhook_server, "/v1", tls.ca_bundle)),
        webhook("v2.test", url_config(webhook_server, "/v2", tls.ca_bundle)),
    )

    assert await admission.validate(job_request(obj=job())) == ["first warning", "second warning"]


async def test_one_denial_among_parallel_validating_webhooks_rejects(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/ok", allow())
    webhook_server.route("/no", deny("nope"))
    configure(
        store,
        "validating",
        "v",
        webhook("ok.test", url_config(webhook_server, "/ok", tls.ca_bundle)),
        webhook("no.test", url_config(webhook_server, "/no", tls.ca_bundle)),
    )

    with pytest.raises(AdmissionError) as denied:
        await admission.validate(job_request(obj=job()))
    assert denied.value.status["message"] == 'admission webhook "no.test" denied the request: nope'
    assert len(webhook_server.calls) == 2


async def test_admission_configuration_objects_are_never_sent_to_webhooks(
    admission: WebhookAdmission, store: FakeStore, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    webhook_server.route("/v", deny("everything is denied"))
    everything = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}
    configure(
        store,
        "validating",
        "v",
        webhook("v.test", url_config(webhook_server, "/v", tls.ca_bundle), rules=[everything]),
    )
    configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "v"},
    }
    request = review_request("validatingwebhookconfigurations", old=configuration)

    assert await admission.validate(request) == []
    with pytest.raises(AdmissionError):
        await admission.validate(job_request(obj=job()))


def gadget_crd(tls: TLSMaterial) -> Obj:
    service = {"namespace": "kadmit-system", "name": "kadmit-webhook-service", "path": "/convert"}
    return {
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Gadget", "plural": "gadgets"},
            "versions": [{"name": "v1", "served": True}, {"name": "v2", "served": True, "storage": True}],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"service": service, "caBundle": tls.ca_bundle},
                    "conversionReviewVersions": ["v1"],
                },
            },
        },
    }


@pytest.mark.parametrize("match_policy", ["Equivalent", "Exact"])
async def test_match_policy_equivalent_converts_to_the_version_the_rules_name(
    admission: WebhookAdmission,
    store: FakeStore,
    webhook_server: WebhookServer,
    tls: TLSMaterial,
    match_policy: str,
) -> None:
    store.put("apiextensions.k8s.io", "customresourcedefinitions", gadget_crd(tls))
    webhook_server.route("/convert", convert_gadgets)
    webhook_server.route(
        "/m", patch_response([{"op": "replace", "path": "/spec/dimensions/size", "value": 4}])
    )
    v2_rule = {
        "operations": ["CREATE"],
        "apiGroups": ["example.com"],
        "apiVersions": ["v2"],
        "resources": ["gadgets"],
    }
    configure(
        store,
        "mutating",
        "m",
        webhook(
            "m.test",
            url_config(webhook_server, "/m", tls.ca_bundle),
            rules=[v2_rule],
            matchPolicy=match_policy,
        ),
    )
    gadget = {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "namespace": "default"},
    }
    gadget["spec"] = {"size": 3}
    request = review_request("gadgets", gadget)

    result = await admission.mutate(request)

    if match_policy == "Exact":
        assert webhook_server.called("/m") == []
        assert result.object == gadget
        return
    [review] = webhook_server.called("/m")
    assert review["request"]["kind"]["version"] == "v2"
    assert review["request"]["requestKind"]["version"] == "v1"
    assert review["request"]["object"]["spec"] == {"dimensions": {"size": 3}}
    assert result.object is not None
    assert result.object["apiVersion"] == "example.com/v1"
    assert result.object["spec"] == {"size": 4}, "the patch made in v2 is converted back to v1"


async def test_a_changed_configuration_counts_from_the_very_next_request(
    webhook_server: WebhookServer, tls: TLSMaterial, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webhooks are built once, not on every request; the store's own events drop what was
    built the moment a configuration is created, changed or deleted."""
    store = Store()
    listed: list[str] = []
    list_objects = store.list

    def counting_list(group: str, resource: str, namespace: str | None = None) -> list[Obj]:
        if group == ADMISSION_GROUP:
            listed.append(resource)
        return list_objects(group, resource, namespace)

    monkeypatch.setattr(store, "list", counting_list)
    webhook_server.route("/deny", deny("no jobs today"))
    webhook_server.route("/allow", allow())
    plugin = WebhookAdmission(store)
    config: Obj = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "v"},
        "webhooks": [webhook("v.test", url_config(webhook_server, "/deny", tls.ca_bundle))],
    }
    try:
        assert await plugin.validate(job_request(obj=job())) == []
        store.create(ADMISSION_GROUP, VALIDATING, copy.deepcopy(config))
        for _ in range(3):
            with pytest.raises(AdmissionError, match="no jobs today"):
                await plugin.validate(job_request(obj=job()))
        assert listed == [VALIDATING, VALIDATING]  # once before the create, once after it

        allowing = copy.deepcopy(config)
        allowing["webhooks"][0]["clientConfig"] = url_config(webhook_server, "/allow", tls.ca_bundle)
        store.replace(ADMISSION_GROUP, VALIDATING, allowing)
        assert await plugin.validate(job_request(obj=job())) == []
        store.remove(ADMISSION_GROUP, VALIDATING, None, "v")
        assert await plugin.validate(job_request(obj=job())) == []
        assert [path for path, _ in webhook_server.calls] == ["/deny"] * 3 + ["/allow"]
    finally:
        await plugin.close()
