"""The HTTPS server's strict request handling, over real TLS."""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import json
import ssl
from typing import Any

import aiohttp
import jsonpatch
import pytest

from kadmit.certs.authority import KeyPair, issue_ca, issue_serving
from kadmit.webhook.review import AdmissionRequest, Denied, Obj, Webhook
from kadmit.webhook.server import MAX_BODY_BYTES
from tests.webhook.conftest import NAMESPACE, SERVER_NAME, SERVICE, client_context, review

JOB = frozenset({("batch", "v1", "Job")})


async def label_it(request: AdmissionRequest) -> Obj:
    obj = copy.deepcopy(request.object or {})
    obj.setdefault("metadata", {}).setdefault("labels", {})["seen-by"] = "kadmit"
    return obj


async def refuse_red(request: AdmissionRequest) -> list[str]:
    labels = ((request.object or {}).get("metadata") or {}).get("labels") or {}
    if labels.get("colour") == "red":
        raise Denied("red jobs are refused")
    return ["looked at it"]


async def explode(request: AdmissionRequest) -> list[str]:
    raise KeyError("spec")


HOOKS = [
    Webhook("/mutate", JOB, mutate=label_it),
    Webhook("/validate", JOB, validate=refuse_red),
    Webhook("/explode", JOB, validate=explode),
]


def job(**labels: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x", "labels": labels}, "spec": {}}


async def test_mutation_returns_a_json_patch_and_echoes_the_uid(serve: Any) -> None:
    server = await serve(HOOKS)
    body = review(job())
    async with await server.post("/mutate", body) as resp:
        assert resp.status == 200
        answer = await resp.json()
    response = answer["response"]
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert response["uid"] == body["request"]["uid"]
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    patched = jsonpatch.apply_patch(body["request"]["object"], patch)
    assert patched["metadata"]["labels"] == {"seen-by": "kadmit"}


async def test_validation_denies_with_message_and_allows_with_warnings(serve: Any) -> None:
    server = await serve(HOOKS)
    body = review(job(colour="red"))
    async with await server.post("/validate", body) as resp:
        response = (await resp.json())["response"]
    assert response == {
        "uid": body["request"]["uid"],
        "allowed": False,
        "status": {"code": 403, "message": "red jobs are refused", "reason": "Forbidden"},
    }
    async with await server.post("/validate", review(job(colour="blue"))) as resp:
        response = (await resp.json())["response"]
    assert response["allowed"] is True and response["warnings"] == ["looked at it"]
    assert "patch" not in response


async def test_a_failing_handler_denies_and_the_server_lives_on(serve: Any) -> None:
    server = await serve(HOOKS)
    body = review(job())
    async with await server.post("/explode", body) as resp:
        assert resp.status == 200
        response = (await resp.json())["response"]
    assert response["uid"] == body["request"]["uid"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert "/explode failed: KeyError" in response["status"]["message"]
    async with await server.post("/validate", review(job())) as resp:
        assert (await resp.json())["response"]["allowed"] is True


@pytest.mark.parametrize(
    ("data", "headers", "reason"),
    [
        (b"{}", {"Content-Type": "text/plain"}, "Content-Type must be application/json, got text/plain"),
        (b"{not json", {}, "invalid JSON: "),
        (b"\xff\xfe", {}, "invalid JSON: "),
        (b"[1, 2]", {}, "the request body must be a JSON object"),
        (b'{"a": NaN}', {}, "invalid JSON: unexpected character"),
        (b'{"a": -Infinity}', {}, "invalid JSON: "),
        (b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", {}, "invalid JSON: depth limit exceeded"),
        (b'{"a": ' + b"9" * 5000 + b"}", {}, "invalid JSON: number is infinity"),
        (b"", {}, "empty request body"),
        (b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}', {}, "expected an"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', {}, "has no request"),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"kind": {}}}',
            {},
            "request.uid is missing",
        ),
    ],
)
async def test_malformed_requests_get_400_with_one_line(
    serve: Any, data: bytes, headers: dict[str, str], reason: str
) -> None:
    server = await serve(HOOKS)
    async with await server.post("/validate", data=data, **headers) as resp:
        assert resp.status == 400
        text = await resp.text()
    assert reason in text
    assert text.count("\n") == 1 and text.endswith("\n")


async def test_json_the_api_server_cannot_send_is_logged_as_a_warning_without_a_trace(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server = await serve(HOOKS)
    deep, long = b"[" * 100_000 + b"]" * 100_000, b"9" * 5000
    for data in (b'{"a": NaN}', b'{"a": ' + deep + b"}", b'{"a": ' + long + b"}"):
        async with await server.post("/validate", data=data) as resp:
            assert resp.status == 400
    refusals = [r for r in caplog.records if r.name == "kadmit.webhook"]
    assert len(refusals) == 3
    assert all(r.levelname == "WARNING" and r.exc_info is None for r in refusals)


async def read_until_closed(reader: asyncio.StreamReader, within: float) -> tuple[bytes, float]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    data = await asyncio.wait_for(reader.read(), within)
    return data, loop.time() - started


async def test_partial_headers_and_bodies_are_not_held_open(
    serve: Any, ca: KeyPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that stops halfway through its headers, dribbles them, or never sends its whole body
    loses the connection (408 for the body) after the read timeout, not after the default hour."""
    from kadmit.webhook import server as server_module

    monkeypatch.setattr(server_module, "REQUEST_READ_TIMEOUT", 0.5)
    server = await serve(HOOKS)
    context = client_context(ca)

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(
            "127.0.0.1", server.server.port, ssl=context, server_hostname=SERVER_NAME
        )

    reader, writer = await connect()
    writer.write(b"POST /validate HTTP/1.1\r\nHost: x\r\n")
    data, took = await read_until_closed(reader, 5)
    assert data == b"" and took < 3, "partial headers: closed without an answer"
    writer.close()

    reader, writer = await connect()

    async def dribble() -> None:
        for byte in b"POST /validate HTTP/1.1\r\nHost: xxxxxxxxxxxxxxxxxxxxxxxx":
            writer.write(bytes([byte]))
            await asyncio.sleep(0.1)

    dribbling = asyncio.ensure_future(dribble())
    data, took = await read_until_closed(reader, 5)
    dribbling.cancel()
    assert data == b"" and took < 3, "headers sent a byte at a time do not keep the connection"
    writer.close()

    reader, writer = await connect()
    writer.write(
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n{\"apiVersion\""
    )
    data, took = await read_until_closed(reader, 5)
    assert data.startswith(b"HTTP/1.1 408 ") and took < 3
    assert data.endswith(b"request body not received within 0.5s\n")
    writer.close()


async def test_a_kind_the_path_does_not_serve_is_a_400(serve: Any) -> None:
    server = await serve(HOOKS)
    body = review({"metadata": {"name": "p"}}, group="", version="v1", kind="Pod")
    async with await server.post("/validate", body) as resp:
        assert resp.status == 400
        assert (await resp.text()) == "/validate serves batch/v1 Job, not v1 Pod\n"


async def test_update_without_old_object_is_a_400(serve: Any) -> None:
    server = await serve(HOOKS)
    async with await server.post("/validate", review(job(), operation="UPDATE")) as resp:
        assert resp.status == 400
        assert "oldObject are required for UPDATE" in await resp.text()


async def test_body_over_the_limit_is_a_400(serve: Any) -> None:
    server = await serve(HOOKS)
    big = review(job(pad="x"))
    big["request"]["object"]["metadata"]["annotations"] = {"pad": "x" * MAX_BODY_BYTES}
    async with await server.post("/validate", big) as resp:
        assert resp.status == 400
        assert "over the limit of 3145728 bytes" in await resp.text()


async def test_chunked_body_over_the_limit_is_a_400(serve: Any) -> None:
    server = await serve(HOOKS)

    async def chunks() -> Any:
        for _ in range(4):
            yield b" " * (1024 * 1024)

    async with server.session.post(
        server.base + "/validate",
        data=chunks(),
        headers={"Content-Type": "application/json"},
        server_hostname=SERVER_NAME,
    ) as resp:
        assert resp.status == 400
        assert "over the limit" in await resp.text()


async def test_probes_follow_the_readiness_callable(serve: Any) -> None:
    ready = False
    server = await serve(HOOKS, readiness=lambda: ready)
    async with server.session.get(server.base + "/healthz", server_hostname=SERVER_NAME) as resp:
        assert resp.status == 200
    async with server.session.get(server.base + "/readyz", server_hostname=SERVER_NAME) as resp:
        assert resp.status == 503
    ready = True
    async with server.session.get(server.base + "/readyz", server_hostname=SERVER_NAME) as resp:
        assert resp.status == 200


async def _peer_fingerprint(port: int, context: ssl.SSLContext) -> str:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=SERVER_NAME)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return hashlib.sha256(der).hexdigest()


async def test_rotation_swaps_the_certificate_without_failing_a_request(
    serve: Any, ca: KeyPair, serving: KeyPair
) -> None:
    server = await serve(HOOKS)
    new_ca = issue_ca()
    new_serving = issue_serving(new_ca, SERVICE, NAMESPACE)
    # The overlap: the API server's bundle holds both CAs while the server switches.
    both = client_context(new_ca, ca)
    assert await _peer_fingerprint(server.server.port, both) == server.tls.fingerprint
    old_fingerprint = server.tls.fingerprint

    failures: list[BaseException] = []
    done = 0
    stop = asyncio.Event()

    async def hammer() -> None:
        nonlocal done
        # A fresh connection per request, so handshakes straddle the swap.
        while not stop.is_set():
            try:
                connector = aiohttp.TCPConnector(ssl=both, force_close=True)
                async with (
                    aiohttp.ClientSession(connector=connector) as session,
                    session.post(
                        server.base + "/validate", json=review(job()), server_hostname=SERVER_NAME
                    ) as resp,
                ):
                    assert resp.status == 200
                    assert (await resp.json())["response"]["allowed"] is True
                done += 1
            except BaseException as exc:  # collected, the test fails below
                failures.append(exc)
                return

    workers = [asyncio.create_task(hammer()) for _ in range(3)]
    await asyncio.sleep(0.15)
    assert server.tls.load(new_serving.cert_pem, new_serving.key_pem) is True
    before_swap = done
    await asyncio.sleep(0.15)
    stop.set()
    await asyncio.gather(*workers)
    assert failures == []
    assert before_swap > 0 and done > before_swap
    new_fingerprint = await _peer_fingerprint(server.server.port, both)
    assert new_fingerprint == server.tls.fingerprint != old_fingerprint
    # Only the new CA is needed from now on; the old one no longer verifies the server.
    assert await _peer_fingerprint(server.server.port, client_context(new_ca)) == new_fingerprint
    with pytest.raises(ssl.SSLCertVerificationError):
        await _peer_fingerprint(server.server.port, client_context(ca))


async def test_a_mismatched_pair_is_refused_and_the_old_one_kept(serve: Any, ca: KeyPair) -> None:
    from kadmit.webhook.tls import CertificateError

    server = await serve(HOOKS)
    other = issue_serving(ca, SERVICE, NAMESPACE)
    fingerprint = server.tls.fingerprint
    with pytest.raises(CertificateError, match="does not match"):
        server.tls.load(other.cert_pem, issue_serving(ca, SERVICE, NAMESPACE).key_pem)
    assert server.tls.fingerprint == fingerprint
    async with await server.post("/validate", review(job())) as resp:
        assert resp.status == 200


async def test_metrics_count_requests_codes_and_verdicts(serve: Any) -> None:
    from prometheus_client import generate_latest

    from kadmit.webhook.metrics import WebhookMetrics

    metrics = WebhookMetrics()
    server = await serve(HOOKS, metrics=metrics)
    async with await server.post("/validate", review(job(colour="red"))) as resp:
        assert resp.status == 200
    async with await server.post("/validate", review(job())) as resp:
        assert resp.status == 200
    async with await server.post("/validate", data=b"{", **{}) as resp:
        assert resp.status == 400
    text = generate_latest(metrics.registry).decode()
    assert 'controller_runtime_webhook_requests_total{code="200",webhook="/validate"} 2.0' in text
    assert 'controller_runtime_webhook_requests_total{code="400",webhook="/validate"} 1.0' in text
    assert 'kadmit_webhook_verdicts_total{allowed="false",webhook="/validate"} 1.0' in text
    assert 'kadmit_webhook_verdicts_total{allowed="true",webhook="/validate"} 1.0' in text
    assert 'controller_runtime_webhook_latency_seconds_count{webhook="/validate"} 3.0' in text
    assert 'controller_runtime_webhook_requests_in_flight{webhook="/validate"} 0.0' in text


async def test_latency_buckets_and_requests_in_flight(serve: Any) -> None:
    from prometheus_client import generate_latest

    from kadmit.webhook.metrics import WebhookMetrics

    metrics = WebhookMetrics()
    entered, leave = asyncio.Event(), asyncio.Event()

    async def slow(request: AdmissionRequest) -> list[str]:
        entered.set()
        await leave.wait()
        await asyncio.sleep(0.03)
        return []

    server = await serve([Webhook("/slow", JOB, validate=slow)], metrics=metrics)
    pending = asyncio.create_task(server.post("/slow", review(job())))
    await entered.wait()
    assert 'controller_runtime_webhook_requests_in_flight{webhook="/slow"} 1.0' in generate_latest(
        metrics.registry
    ).decode()
    leave.set()
    async with await pending as resp:
        assert resp.status == 200
    text = generate_latest(metrics.registry).decode()
    assert 'controller_runtime_webhook_requests_in_flight{webhook="/slow"} 0.0' in text
    assert 'controller_runtime_webhook_latency_seconds_bucket{le="0.025",webhook="/slow"} 0.0' in text
    assert 'controller_runtime_webhook_latency_seconds_bucket{le="+Inf",webhook="/slow"} 1.0' in text
    assert 'controller_runtime_webhook_latency_seconds_created{webhook="/slow"}' in text
