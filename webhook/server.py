"""The HTTPS admission server: strict request handling around the handlers.

Every admission path reads the body itself (bounded at the API server's 3 MiB), insists on
JSON and on an AdmissionReview v1 of a kind the path serves, and answers anything else with a
400 and one line of reason. Whatever a handler raises is turned into a denial that echoes the
request uid: a crashing handler must deny, never let an unchecked Job through and never take
the server down.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from kadmit.webhook.metrics import WebhookMetrics
from kadmit.webhook.patch import diff
from kadmit.webhook.review import (
    AdmissionRequest,
    BadRequest,
    Denied,
    Verdict,
    Webhook,
    admission_response,
    compact_json,
    kinds_label,
    parse_admission_review,
    parse_json,
)
from kadmit.workload import Obj

log = logging.getLogger("kadmit.webhook")

MAX_BODY_BYTES = 3 * 1024 * 1024
"""The API server never sends more (its own request limit); anything larger is not from it."""
_CHUNK = 64 * 1024
REQUEST_READ_TIMEOUT = 32.0
"""Seconds a client has to send a request's headers (counted from the connection's last answer,
or its start) and, separately, its body: controller-runtime's webhook server gives 32 s for the
headers. aiohttp keeps one timer for headers and idle keep-alive, so an idle connection is also
closed after 32 s (controller-runtime: 90 s); kube-apiserver's Go client retries a request on an
idle connection the server closed, and aiohttp's client drops idle connections after 15 s."""

Readiness = Callable[[], bool]
JsonHandler = Callable[[Obj], Awaitable[Obj]]
"""A non-admission JSON endpoint such as ``/convert``: raises BadRequest for a malformed body."""


def _json_response(document: Obj) -> web.Response:
    """Compact JSON bytes: cheaper than ``web.json_response``, which encodes text with a charset."""
    return web.Response(body=compact_json(document), content_type="application/json")


def _bad_request(reason: str, status: int = 400) -> web.Response:
    one_line = " ".join(reason.split())
    response = web.Response(status=status, text=one_line + "\n", content_type="text/plain")
    # The rest of a refused body may still be on the wire: close rather than drain it.
    response.force_close()
    return response


async def read_json_body(request: web.Request, limit: int = MAX_BODY_BYTES) -> Obj:
    """The request body as a JSON object, after the content-type and size checks."""
    if request.content_type != "application/json":
        raise BadRequest(f"Content-Type must be application/json, got {request.content_type or 'none'}")
    declared = request.content_length
    if declared is not None and declared > limit:
        raise BadRequest(f"request body of {declared} bytes is over the limit of {limit} bytes")
    content = request.content
    body = content.read_nowait(-1)  # what already arrived: almost always the whole body
    if not content.at_eof():  # the rest is still on its way: wait for it, within the limits
        collected = bytearray(body)
        try:
            async with asyncio.timeout(REQUEST_READ_TIMEOUT):
                while chunk := await content.read(_CHUNK):
                    collected += chunk
                    if len(collected) > limit:
                        raise BadRequest(f"request body is over the limit of {limit} bytes")
        except TimeoutError:
            message = f"request body not received within {REQUEST_READ_TIMEOUT:g}s"
            raise BadRequest(message, status=408) from None
        body = bytes(collected)
    if len(body) > limit:
        raise BadRequest(f"request body is over the limit of {limit} bytes")
    if not body:
        raise BadRequest("empty request body")
    return parse_json(body)


async def review(hook: Webhook, request: AdmissionRequest) -> Verdict:
    """Run the hook's handlers; every failure becomes a denial."""
    try:
        warnings: list[str] = []
        patch = []
        if hook.mutate is not None and request.object is not None:
            wanted = await hook.mutate(request)
            if wanted is not None:
                patch = diff(request.object, wanted)
        if hook.validate is not None:
            warnings = await hook.validate(request)
        return Verdict(allowed=True, patch=patch, warnings=warnings)
    except Denied as exc:
        return Verdict(allowed=False, message=exc.message, code=exc.code, reason=exc.reason)
    except Exception as exc:
        log.exception("webhook %s failed on %s %s", hook.path, request.operation, request.display_name)
        return Verdict(
            allowed=False,
            message=f"kadmit webhook {hook.path} failed: {type(exc).__name__}: {exc}",
            code=500,
            reason="InternalError",
        )


def _admission_endpoint(
    hook: Webhook, metrics: WebhookMetrics | None
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(http_request: web.Request) -> web.StreamResponse:
        try:
            document = await read_json_body(http_request)
            request = parse_admission_review(document)
            if not hook.serves(request):
                raise BadRequest(
                    f"{hook.path} serves {kinds_label(hook.kinds)}, not "
                    f"{request.group + '/' if request.group else ''}{request.version} {request.kind}"
                )
        except BadRequest as exc:
            log.warning("bad request on %s: %s", hook.path, exc)
            return _bad_request(str(exc), exc.status)
        # A shape the parser did not foresee is still the caller's fault, and still one line.
        except Exception as exc:
            log.exception("unreadable AdmissionReview on %s", hook.path)
            return _bad_request(f"unreadable AdmissionReview: {type(exc).__name__}: {exc}")
        started = time.perf_counter()
        verdict = await review(hook, request)
        if metrics is not None:
            metrics.verdict(hook.path, verdict.allowed)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s %s %s %s: allowed=%s in %.1f ms",
                hook.path,
                request.operation,
                request.kind,
                request.display_name,
                verdict.allowed,
                (time.perf_counter() - started) * 1000,
            )
        return _json_response(admission_response(request.uid, verdict))

    return handle


def _json_endpoint(path: str, handler: JsonHandler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(http_request: web.Request) -> web.StreamResponse:
        try:
            document = await read_json_body(http_request)
            answer = await handler(document)
        except BadRequest as exc:
            log.warning("bad request on %s: %s", path, exc)
            return _bad_request(str(exc), exc.status)
        except Exception as exc:  # never a 500: the caller gets one line, the log gets the trace
            log.exception("request on %s failed", path)
            return _bad_request(f"unreadable request: {type(exc).__name__}: {exc}")
        return _json_response(answer)

    return handle


def create_app(
    webhooks: Iterable[Webhook],
    readiness: Readiness = lambda: True,
    extra: dict[str, JsonHandler] | None = None,
    metrics: WebhookMetrics | None = None,
) -> web.Application:
    """An application serving each webhook at its path, ``extra`` JSON endpoints, and the probes."""
    # aiohttp's own limit is a backstop above ours, so that our 400 (not its 413) is what callers see.
    app = web.Application(client_max_size=MAX_BODY_BYTES + 1024 * 1024)
    endpoints = [(hook.path, _admission_endpoint(hook, metrics)) for hook in webhooks]
    endpoints += [(path, _json_endpoint(path, handler)) for path, handler in (extra or {}).items()]
    for path, endpoint in endpoints:
        app.router.add_post(path, endpoint if metrics is None else metrics.instrument(path, endpoint))

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        if readiness():
            return web.Response(text="ok\n")
        return web.Response(status=503, text="not ready\n")

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


@dataclass(eq=False)
class WebhookServer:
    """Serves an application over HTTPS with a context that :class:`kadmit.webhook.tls.ServingTLS` reloads.

    ``port`` 0 binds any free port; once started, ``port`` is the bound one."""

    app: web.Application
    ssl_context: ssl.SSLContext | None
    host: str = "0.0.0.0"
    port: int = 9443
    _runner: web.AppRunner | None = field(default=None, init=False)

    async def start(self) -> None:
        # lingering_time=0: the unread rest of a refused (oversized) body is not drained for 10 s.
        runner = web.AppRunner(
            self.app,
            access_log=None,
            handle_signals=False,
            lingering_time=0,
            keepalive_timeout=REQUEST_READ_TIMEOUT,
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, ssl_context=self.ssl_context)
        await site.start()
        self._runner = runner
        address: Any = runner.addresses[0]
        self.port = int(address[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> WebhookServer:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()
