"""A TLS client that offers only what a test asks for, to see what a kadmit server accepts."""

from __future__ import annotations

import asyncio
import logging
import ssl

import pytest


def client(
    *,
    maximum: ssl.TLSVersion | None = None,
    minimum: ssl.TLSVersion | None = None,
    ciphers: str | None = None,
) -> ssl.SSLContext:
    """A client limited to these versions and (TLS 1.2) OpenSSL suites; it trusts any certificate,
    as what is under test is the negotiation, not the server's name."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if maximum is not None:
        context.maximum_version = maximum
    if minimum is not None:
        context.minimum_version = minimum
    if ciphers is not None:
        context.set_ciphers(ciphers)
    return context


async def handshake(port: int, context: ssl.SSLContext) -> tuple[str, str]:
    """The (version, OpenSSL suite name) agreed with 127.0.0.1:``port``; ssl.SSLError when refused."""
    _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=context), 10)
    try:
        tls = writer.get_extra_info("ssl_object")
        version, cipher = tls.version(), tls.cipher()
        assert version is not None and cipher is not None
        return version, cipher[0]
    finally:
        writer.close()


async def refusal(port: int, context: ssl.SSLContext, caplog: pytest.LogCaptureFixture) -> str:
    """The OpenSSL reason the server (in this event loop) refused this client for.

    The server aborts the connection, so the client sees a reset, not the alert: the reason is
    what asyncio logs for the server's side, which it does only in debug mode."""
    loop = asyncio.get_running_loop()
    debug = loop.get_debug()
    loop.set_debug(True)
    try:
        with caplog.at_level(logging.DEBUG, logger="asyncio"):
            caplog.clear()
            with pytest.raises((ssl.SSLError, ConnectionResetError)):
                await handshake(port, context)
            for _ in range(200):  # the server's side may end just after the client's
                for record in caplog.records:
                    error = record.exc_info[1] if record.exc_info else None
                    if isinstance(error, ssl.SSLError):
                        return str(error.reason)
                await asyncio.sleep(0.01)
    finally:
        loop.set_debug(debug)
    raise AssertionError("the server logged no TLS error")
