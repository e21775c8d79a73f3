"""The webhook server on a loop of its own thread: a review is answered while the starting
loop computes, and the server's SSL context is changed only from its own thread."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kadmit.certs.authority import KeyPair, issue_serving
from kadmit.webhook.review import AdmissionRequest, Webhook
from kadmit.webhook.server import WebhookServer, create_app
from kadmit.webhook.thread import WebhookThread
from kadmit.webhook.tls import ServingTLS
from tests.webhook.conftest import NAMESPACE, SERVER_NAME, SERVICE, client_context, review

JOB = frozenset({("batch", "v1", "Job")})
JOB_OBJECT = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": {}}


async def allow(request: AdmissionRequest) -> list[str]:
    return []


def served(serving: KeyPair, port: int = 0) -> tuple[WebhookServer, ServingTLS]:
    tls = ServingTLS()
    tls.load(serving.cert_pem, serving.key_pem)
    app = create_app([Webhook("/validate", JOB, validate=allow)])
    return WebhookServer(app, tls.context, host="127.0.0.1", port=port), tls


def post_review(port: int, ca: KeyPair) -> tuple[int, float]:
    """One review over verified HTTPS, from a thread of its own (the test's loop is busy): the
    status and the seconds it took."""
    started = time.perf_counter()
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10)
    try:
        # Verify the name the API server would: connect by address, check the Service's DNS name.
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        connection.sock = client_context(ca).wrap_socket(raw, server_hostname=SERVER_NAME)
        body = json.dumps(review(JOB_OBJECT)).encode()
        connection.request("POST", "/validate", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        assert answer["response"]["allowed"] is True
        return response.status, time.perf_counter() - started
    finally:
        connection.close()


async def test_a_review_is_answered_while_the_starting_loop_computes(ca: KeyPair, serving: KeyPair) -> None:
    server, _ = served(serving)
    webhook = WebhookThread(server)
    await webhook.start()
    try:
        answers: list[tuple[int, float]] = []
        client = threading.Thread(target=lambda: answers.append(post_review(webhook.port, ca)))
        busy_until = time.perf_counter() + 1.0
        client.start()
        while time.perf_counter() < busy_until:  # this loop holds the GIL and never awaits
            sum(range(1000))
        client.join(10)
        assert answers, "no answer"
        status, seconds = answers[0]
        assert status == 200
        # On the caller's loop the review would wait the whole second; on its own, a few switches.
        assert seconds < 0.5, f"answered after {seconds:.3f} s"
    finally:
        await webhook.stop()


async def test_run_calls_on_the_servers_thread_while_it_serves_and_here_otherwise(serving: KeyPair) -> None:
    server, _ = served(serving)
    webhook = WebhookThread(server)
    assert webhook.run(threading.current_thread) is threading.current_thread()
    await webhook.start()
    try:
        where = webhook.run(threading.current_thread)
        assert where is not threading.current_thread() and where.name == "kadmit-webhook"
        assert webhook.loop is not None and webhook.loop is not asyncio.get_running_loop()
        with pytest.raises(ZeroDivisionError):
            webhook.run(lambda: 1 / 0)
    finally:
        await webhook.stop()
    assert not where.is_alive()
    assert webhook.loop is None
    assert webhook.run(threading.current_thread) is threading.current_thread()


async def test_a_certificate_loaded_through_run_is_served_from_the_next_handshake(ca: KeyPair) -> None:
    first, second = issue_serving(ca, SERVICE, NAMESPACE), issue_serving(ca, SERVICE, NAMESPACE)
    server, tls = served(first)
    webhook = WebhookThread(server)
    await webhook.start()
    try:
        assert (await asyncio.to_thread(post_review, webhook.port, ca))[0] == 200
        assert webhook.run(lambda: tls.load(second.cert_pem, second.key_pem)) is True
        context = client_context(ca)
        _, writer = await asyncio.open_connection(
            "127.0.0.1", webhook.port, ssl=context, server_hostname=SERVER_NAME)
        try:
            der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        finally:
            writer.close()
        served_cert = x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)
        assert served_cert == x509.load_pem_x509_certificate(second.cert_pem).public_bytes(
            serialization.Encoding.PEM)
    finally:
        await webhook.stop()


async def test_a_server_that_cannot_bind_fails_start_and_leaves_no_thread(serving: KeyPair) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server, _ = served(serving, port=taken.getsockname()[1])
        webhook = WebhookThread(server)
        with pytest.raises(OSError):
            await webhook.start()
    assert not [t for t in threading.enumerate() if t.name == "kadmit-webhook"]
    assert webhook.loop is None
    await webhook.stop()  # nothing to stop: no error
