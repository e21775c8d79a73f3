"""The webhook client on its own: targets, TLS contexts and typed failures."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from kadmit.localcluster.webhookclient import (
    WebhookCallError,
    WebhookClient,
    WebhookConfigError,
    WebhookConnectionError,
    WebhookHTTPStatusError,
    WebhookMalformedResponse,
    WebhookTLSError,
    go_duration,
)
from tests.localcluster.conftest_admission import *  # noqa: F403
from tests.localcluster.conftest_admission import SERVICE_DNS, TLSMaterial, WebhookServer


@pytest.fixture
async def webhook_client(webhook_server: WebhookServer) -> AsyncIterator[WebhookClient]:
    def resolve(namespace: str, name: str, port: int) -> tuple[str, int]:
        if name == "kadmit-webhook-service":
            return ("127.0.0.1", webhook_server.port)
        raise LookupError(f'service "{name}" not found')

    async with WebhookClient(resolve) as client:
        yield client


@pytest.mark.parametrize(
    ("bundle", "detail"),
    [
        (
            "not base64!",
            "could not get REST client: unable to load root certificates: caBundle is not valid base64",
        ),
        (
            base64.b64encode(b"hello").decode(),
            "could not get REST client: unable to load root certificates: unable to parse bytes as PEM block",
        ),
    ],
)
def test_unusable_ca_bundles_are_config_errors(bundle: str, detail: str) -> None:
    client = WebhookClient()
    with pytest.raises(WebhookConfigError) as failed:
        client.target({"url": "https://127.0.0.1:1/x", "caBundle": bundle}, 10)
    assert failed.value.reason == detail


def test_ssl_contexts_are_cached_per_bundle(tls: TLSMaterial) -> None:
    client = WebhookClient()
    assert client.ssl_context(tls.ca_bundle) is client.ssl_context(tls.ca_bundle)
    assert client.ssl_context(tls.ca_bundle) is not client.ssl_context(tls.other_ca_bundle)


@pytest.mark.parametrize(
    "config",
    [
        {"url": "http://127.0.0.1:1/plain"},
        {"service": {"name": "svc"}},
        {},
    ],
)
def test_invalid_client_configs_are_rejected(config: dict[str, object]) -> None:
    with pytest.raises(WebhookConfigError):
        WebhookClient().target(config, 10)


def test_service_targets_keep_the_service_name_for_tls_and_messages(tls: TLSMaterial) -> None:
    client = WebhookClient(lambda namespace, name, port: ("127.0.0.1", 8443))
    service = {
        "namespace": "kadmit-system",
        "name": "kadmit-webhook-service",
        "port": 9443,
        "path": "convert",
    }

    target = client.target({"service": service, "caBundle": tls.ca_bundle}, 30, timeout_query=False)

    assert target.display_url == f"https://{SERVICE_DNS}:9443/convert"
    assert target.connect_url == "https://127.0.0.1:8443/convert"
    assert target.server_hostname == SERVICE_DNS
    assert target.host_header == f"{SERVICE_DNS}:9443"


def test_go_durations() -> None:
    assert go_duration(10) == "10s"
    assert go_duration(1.5) == "1500ms"


async def test_answers_that_are_not_json_objects_are_typed(
    webhook_client: WebhookClient, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    async def text(review: dict[str, object]) -> web.StreamResponse:
        return web.Response(text="not json")

    async def array(review: dict[str, object]) -> web.StreamResponse:
        return web.json_response([1, 2])

    async def teapot(review: dict[str, object]) -> web.StreamResponse:
        return web.Response(status=418, text="short and stout")

    cases: list[tuple[str, object, type[WebhookCallError], str]] = [
        ("/text", text, WebhookMalformedResponse, "failed to call webhook: response is not JSON"),
        ("/array", array, WebhookMalformedResponse, "failed to call webhook: response is not a JSON object"),
        ("/teapot", teapot, WebhookHTTPStatusError, '("short and stout") has prevented the request'),
    ]
    for path, handler, error, detail in cases:
        webhook_server.route(path, handler)  # type: ignore[arg-type]
        target = webhook_client.target({"url": webhook_server.url(path), "caBundle": tls.ca_bundle}, 5)
        with pytest.raises(error) as failed:
            await webhook_client.post(target, {"kind": "AdmissionReview", "request": {"uid": "u"}})
        assert detail in failed.value.reason


async def test_transport_failures_are_typed(
    webhook_client: WebhookClient, webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    refused = webhook_client.target({"url": "https://127.0.0.1:1/x", "caBundle": tls.ca_bundle}, 5)
    with pytest.raises(WebhookConnectionError):
        await webhook_client.post(refused, {})

    untrusted = webhook_client.target({"url": webhook_server.url("/x"), "caBundle": tls.other_ca_bundle}, 5)
    with pytest.raises(WebhookTLSError):
        await webhook_client.post(untrusted, {})

    with pytest.raises(WebhookConnectionError) as unresolved:
        webhook_client.target({"service": {"namespace": "ns", "name": "gone"}, "caBundle": tls.ca_bundle}, 5)
    assert unresolved.value.reason == (
        'failed to call webhook: Post "https://gone.ns.svc:443/?timeout=5s": service "gone" not found'
    )
