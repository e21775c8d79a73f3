"""Calling admission and conversion webhooks the way kube-apiserver does.

One aiohttp session is shared by every call. A ``clientConfig`` names either a ``url`` or a
``service``; services are mapped to a local address by a resolver, while TLS is still verified
against ``<name>.<namespace>.svc``, so a serving certificate that works in a real cluster is the
one that works here. Every failure is a :class:`WebhookCallError` whose ``reason`` reads like the
Go client's error, because callers quote it verbatim to the user.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import errno
import ssl
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from yarl import URL

from kadmit.localcluster.objects import Obj, dumps, loads

ServiceResolver = Callable[[str, str, int], tuple[str, int]]
"""``(namespace, name, port) -> (host, port)``; raises :class:`LookupError` with a one-line reason."""

DEFAULT_SERVICE_PORT = 443

# OpenSSL verify codes that Go reports as an unknown authority.
_UNKNOWN_AUTHORITY = {2, 18, 19, 20, 21}
_EXPIRED = {9, 10}
_HOSTNAME_MISMATCH = {62, 64}
_NO_ROOTS = "unable to load root certificates"


class WebhookCallError(Exception):
    """A webhook that could not be called, or whose answer could not be read.

    ``reason`` is what follows ``failed calling webhook "<name>": `` in the API server's message.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WebhookConfigError(WebhookCallError):
    """The clientConfig itself is unusable (bad caBundle, bad URL): no request was sent."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"could not get REST client: {detail}")


class WebhookTransportError(WebhookCallError):
    """The POST did not produce a usable HTTP answer."""

    def __init__(self, url: str, detail: str) -> None:
        super().__init__(f'failed to call webhook: Post "{url}": {detail}')
        self.url = url
        self.detail = detail


class WebhookConnectionError(WebhookTransportError):
    """Nothing accepted the connection (refused, unreachable, service without endpoints)."""


class WebhookTLSError(WebhookTransportError):
    """The TLS handshake failed, typically because the caBundle does not verify the server."""


class WebhookTimeout(WebhookTransportError):
    """No complete answer within ``timeoutSeconds``."""

    def __init__(self, url: str) -> None:
        super().__init__(url, "context deadline exceeded")


class WebhookHTTPStatusError(WebhookCallError):
    """The webhook answered with a non-2xx HTTP status."""

    def __init__(self, status: int, body: str) -> None:
        if status == 404:
            detail = "the server could not find the requested resource"
        else:
            shown = body.strip()[:256]
            detail = f'an error on the server ("{shown}") has prevented the request from succeeding'
        super().__init__(f"failed to call webhook: {detail}")
        self.status = status
        self.body = body


class WebhookMalformedResponse(WebhookCallError):
    """The webhook answered 2xx with a body that is not a JSON object."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"failed to call webhook: {detail}")


_MAX_URLS = 256


@dataclass(frozen=True)
class WebhookTarget:
    """Where one call goes: the URL as the user knows it, and how it is actually reached."""

    display_url: str  # as in messages, e.g. https://svc.ns.svc:443/path?timeout=10s
    connect_url: str  # what aiohttp connects to
    server_hostname: str | None  # TLS SNI / verification name when it differs from connect_url's host
    host_header: str | None
    ssl_context: ssl.SSLContext
    timeout_seconds: float


def go_duration(seconds: float) -> str:
    """Render a timeout as Go's ``time.Duration.String`` does for the values webhooks use."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{int(seconds * 1000)}ms"


class WebhookClient:
    """The API server's single HTTPS client for webhooks; create it inside the event loop's lifetime."""

    def __init__(self, service_resolver: ServiceResolver | None = None) -> None:
        self._service_resolver = service_resolver
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self._ssl_contexts: dict[str, ssl.SSLContext] = {}
        self._urls: dict[str, URL] = {}  # connect URLs parsed once (a few per configuration)

    async def __aenter__(self) -> WebhookClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None and self._session_loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None

    def ssl_context(self, ca_bundle: str | None) -> ssl.SSLContext:
        """Trust exactly the caBundle (base64 PEM), or the system roots when there is none; cached."""
        key = ca_bundle or ""
        cached = self._ssl_contexts.get(key)
        if cached is not None:
            return cached
        if not key:
            context = ssl.create_default_context()
        else:
            try:
                pem = base64.b64decode(key, validate=True).decode("ascii")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                raise WebhookConfigError(f"{_NO_ROOTS}: caBundle is not valid base64") from None
            if "-----BEGIN CERTIFICATE-----" not in pem:
                raise WebhookConfigError(f"{_NO_ROOTS}: unable to parse bytes as PEM block")
            try:
                context = ssl.create_default_context(cadata=pem)
            except ssl.SSLError as exc:
                raise WebhookConfigError(f"{_NO_ROOTS}: {exc.reason or exc}") from None
        self._ssl_contexts[key] = context
        return context

    def target(
        self, client_config: Obj, timeout_seconds: float, *, timeout_query: bool = True
    ) -> WebhookTarget:
        """Resolve a clientConfig to a target; raises :class:`WebhookCallError` when it cannot.

        ``timeout_query`` appends ``?timeout=<d>`` as the Go REST client does for admission calls.
        """
        query = f"?timeout={go_duration(timeout_seconds)}" if timeout_query else ""
        context = self.ssl_context(client_config.get("caBundle"))
        url = client_config.get("url")
        service = client_config.get("service")
        if url:
            parsed = URL(str(url))
            if parsed.scheme != "https" or not parsed.host:
                raise WebhookConfigError(f'webhook url "{url}" must be an https URL with a host')
            full = f"{url}{query}"
            return WebhookTarget(full, full, None, None, context, timeout_seconds)
        if not isinstance(service, dict) or not service.get("name") or not service.get("namespace"):
            raise WebhookConfigError("clientConfig needs a url or a service with a namespace and a name")
        namespace, name = str(service["namespace"]), str(service["name"])
        port = int(service.get("port") or DEFAULT_SERVICE_PORT)
        path = str(service.get("path") or "")
        if not path.startswith("/"):
            path = "/" + path  # the Go client always sends a path, "/" when none is configured
        dns_name = f"{name}.{namespace}.svc"
        display = f"https://{dns_name}:{port}{path}{query}"
        if self._service_resolver is None:
            raise WebhookConnectionError(display, f'service "{name}" not found')
        try:
            host, local_port = self._service_resolver(namespace, name, port)
        except LookupError as exc:
            raise WebhookConnectionError(display, str(exc.args[0]) if exc.args else str(exc)) from None
        connect_host = f"[{host}]" if ":" in host else host
        return WebhookTarget(
            display,
            f"https://{connect_host}:{local_port}{path}{query}",
            dns_name,
            f"{dns_name}:{port}",
            context,
            timeout_seconds,
        )

    async def post(self, target: WebhookTarget, body: Obj) -> Obj:
        """POST ``body`` as JSON and return the decoded JSON object the webhook answered."""
        session = self._ensure_session()
        headers = {"Content-Type": "application/json", "Accept": "application/json, */*"}
        if target.host_header:
            headers["Host"] = target.host_header
        payload = dumps(body)
        url = self._urls.get(target.connect_url)
        if url is None:
            if len(self._urls) >= _MAX_URLS:
                self._urls.clear()
            url = self._urls[target.connect_url] = URL(target.connect_url)
        try:
            # aiohttp's total deadline covers connecting, sending and reading the whole answer.
            async with session.post(
                url,
                data=payload,
                headers=headers,
                ssl=target.ssl_context,
                server_hostname=target.server_hostname,
                timeout=aiohttp.ClientTimeout(total=target.timeout_seconds),
            ) as response:
                raw = await response.read()
                status = response.status
        except TimeoutError:  # aiohttp's timeouts are TimeoutErrors, connecting's included
            raise WebhookTimeout(target.display_url) from None
        except aiohttp.ClientConnectorCertificateError as exc:
            raise WebhookTLSError(target.display_url, _describe_certificate_error(exc, target)) from None
        except aiohttp.ClientSSLError as exc:
            raise WebhookTLSError(target.display_url, f"remote error: tls: {exc}") from None
        except aiohttp.ClientConnectorError as exc:
            raise WebhookConnectionError(target.display_url, _describe_connect_error(exc)) from None
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as exc:
            raise WebhookTransportError(target.display_url, f"EOF ({exc})") from None
        except aiohttp.ClientError as exc:
            raise WebhookTransportError(target.display_url, str(exc) or type(exc).__name__) from None
        if not 200 <= status < 300:
            raise WebhookHTTPStatusError(status, raw.decode("utf-8", errors="replace"))
        try:
            decoded = loads(raw)
        except ValueError as exc:
            raise WebhookMalformedResponse(f"response is not JSON: {exc}") from None
        if not isinstance(decoded, dict):
            raise WebhookMalformedResponse("response is not a JSON object")
        return decoded

    def _ensure_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            # A session belongs to the loop it was made in; a client reused from another loop
            # (one event loop per test) starts afresh rather than failing.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=64),
                trust_env=False,
            )
            self._session_loop = loop
        return self._session


def review_problem(answer: Obj, kind: str, api_version: str, uid: str, absent: str) -> str | None:
    """What makes a webhook's answer to a ``kind`` review unusable before its own fields are read
    (another apiVersion or kind, no response, another uid), in the API server's words; None if
    nothing does. ``absent`` is how the caller's kind of review words a missing response."""
    if answer.get("apiVersion") != api_version or answer.get("kind") != kind:
        got = f"{answer.get('apiVersion', '')}, Kind={answer.get('kind', '')}"
        return f"expected webhook response of {api_version}, Kind={kind}, got {got}"
    response = answer.get("response")
    if not isinstance(response, dict):
        return absent
    if response.get("uid") != uid:
        return f'expected response.uid="{uid}", got "{response.get("uid", "")}"'
    return None


def _describe_connect_error(exc: aiohttp.ClientConnectorError) -> str:
    where = f"dial tcp {exc.host}:{exc.port}"
    os_error = exc.os_error
    if isinstance(os_error, ConnectionRefusedError) or os_error.errno == errno.ECONNREFUSED:
        return f"{where}: connect: connection refused"
    return f"{where}: {os_error.strerror or os_error}"


def _describe_certificate_error(exc: aiohttp.ClientConnectorCertificateError, target: WebhookTarget) -> str:
    error = exc.certificate_error
    code = getattr(error, "verify_code", None)
    if code in _UNKNOWN_AUTHORITY:
        detail = "certificate signed by unknown authority"
    elif code in _EXPIRED:
        detail = "certificate has expired or is not yet valid"
    elif code in _HOSTNAME_MISMATCH:
        name = target.server_hostname or URL(target.connect_url).host
        detail = f"certificate is not valid for {name}"
    else:
        detail = str(getattr(error, "verify_message", None) or error)
    return f"tls: failed to verify certificate: x509: {detail}"
