"""Kueue's ``tls`` options on the webhook server's context: Go's suite names mapped to OpenSSL's,
the minimum version and the suites enforced in real handshakes, and no change without them."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kadmit.certs.authority import KeyPair
from kadmit.webhook.server import WebhookServer, create_app
from kadmit.webhook.tls import GO_CIPHER_SUITES, ServingTLS, TLSOptions, unavailable_suites
from tests.handshake import client, handshake, refusal

TLS12, TLS13 = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3

# Go's crypto/tls constants (cipher_suites.go): the IANA code point of each name Kueue accepts.
GO_CODE_POINTS = {
    "TLS_AES_128_GCM_SHA256": 0x1301,
    "TLS_AES_256_GCM_SHA384": 0x1302,
    "TLS_CHACHA20_POLY1305_SHA256": 0x1303,
    "TLS_RSA_WITH_RC4_128_SHA": 0x0005,
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": 0x000A,
    "TLS_RSA_WITH_AES_128_CBC_SHA": 0x002F,
    "TLS_RSA_WITH_AES_256_CBC_SHA": 0x0035,
    "TLS_RSA_WITH_AES_128_CBC_SHA256": 0x003C,
    "TLS_RSA_WITH_AES_128_GCM_SHA256": 0x009C,
    "TLS_RSA_WITH_AES_256_GCM_SHA384": 0x009D,
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": 0xC007,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": 0xC009,
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": 0xC00A,
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": 0xC011,
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": 0xC012,
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": 0xC013,
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": 0xC014,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": 0xC023,
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": 0xC027,
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": 0xC02F,
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": 0xC02B,
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": 0xC030,
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": 0xC02C,
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA8,
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA9,
    # k8s.io/component-base's legacy names
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": 0xCCA8,
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": 0xCCA9,
}


def code_points(context: ssl.SSLContext) -> list[int]:
    return [c["id"] & 0xFFFF for c in context.get_ciphers()]


def test_every_go_suite_maps_to_the_openssl_suite_of_its_code_point() -> None:
    assert set(GO_CIPHER_SUITES) == set(GO_CODE_POINTS)
    missing = set(unavailable_suites(GO_CIPHER_SUITES))
    assert missing <= {n for n in GO_CIPHER_SUITES if "RC4" in n or "3DES" in n}  # OpenSSL 3 drops these
    for name, openssl_name in GO_CIPHER_SUITES.items():
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if openssl_name is None:  # TLS 1.3: not configurable, always offered
            assert GO_CODE_POINTS[name] in code_points(context), name
        elif name not in missing:
            context.set_ciphers(openssl_name)
            tls12 = [p for p in code_points(context) if p >> 8 != 0x13]
            assert tls12 == [GO_CODE_POINTS[name]], name


def test_without_options_the_context_is_what_it_was() -> None:
    """No ``tls`` block: TLS 1.2 and up, OpenSSL's (Python's) default suites, as before."""
    bare = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    for context in (ServingTLS().context, ServingTLS(TLSOptions()).context):
        assert context.minimum_version == TLS12
        assert context.maximum_version == bare.maximum_version
        assert context.get_ciphers() == bare.get_ciphers()


def test_only_tls13_suites_listed_refuses_tls12_as_go_does() -> None:
    context = ServingTLS(TLSOptions(cipher_suites=("TLS_AES_128_GCM_SHA256",))).context
    assert context.minimum_version == TLS13


@pytest.fixture
async def https(serving: KeyPair) -> AsyncIterator[Callable[[TLSOptions], Any]]:
    """Start a webhook server whose context has the given options; returns its port."""
    servers: list[WebhookServer] = []

    async def start(options: TLSOptions) -> int:
        tls = ServingTLS(options)
        tls.load(serving.cert_pem, serving.key_pem)
        server = WebhookServer(create_app([]), tls.context, host="127.0.0.1", port=0)
        await server.start()
        servers.append(server)
        return server.port

    yield start
    for server in servers:
        await server.stop()


async def test_min_version_tls13_refuses_a_tls12_client(
    https: Callable[[TLSOptions], Any], caplog: pytest.LogCaptureFixture
) -> None:
    port = await https(TLSOptions(min_version=TLS13))
    assert await refusal(port, client(maximum=TLS12), caplog) == "UNSUPPORTED_PROTOCOL"
    assert (await handshake(port, client(minimum=TLS13)))[0] == "TLSv1.3"
    default = await https(TLSOptions())  # the same client is served without the option
    assert (await handshake(default, client(maximum=TLS12)))[0] == "TLSv1.2"


async def test_cipher_suites_refuse_a_tls12_client_offering_another(
    https: Callable[[TLSOptions], Any], caplog: pytest.LogCaptureFixture
) -> None:
    listing = ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256")
    port = await https(TLSOptions(cipher_suites=listing))
    outside = client(maximum=TLS12, ciphers="ECDHE-ECDSA-AES256-GCM-SHA384")
    assert await refusal(port, outside, caplog) == "NO_SHARED_CIPHER"
    listed = client(maximum=TLS12, ciphers="ECDHE-ECDSA-AES128-GCM-SHA256")
    assert await handshake(port, listed) == ("TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    # TLS 1.3's suites are not configurable, in Go as here: any of them is still agreed.
    assert (await handshake(port, client(minimum=TLS13)))[0] == "TLSv1.3"
    default = await https(TLSOptions())
    assert (await handshake(default, outside))[1] == "ECDHE-ECDSA-AES256-GCM-SHA384"
