"""Secure metrics serving: ``/metrics`` on HTTPS, for callers the API server vouches for.

What controller-runtime's ``metricsserver.Options{SecureServing: true, FilterProvider:
filters.WithAuthenticationAndAuthorization}`` does, which Kueue's manager runs with:

* HTTPS with a self-signed certificate made in memory at start (for the metrics Service's DNS
  names; scrapers skip verification or pin it, as they do for controller-runtime's);
* the caller's bearer token is checked with a ``TokenReview`` (401 ``Unauthorized`` without one,
  or when the API server does not know it);
* the user it names must be allowed ``get`` on the non-resource URL ``/metrics`` by a
  ``SubjectAccessReview`` (403 ``Authorization denied for user <name>`` otherwise) — the
  ``kadmit-metrics-reader`` ClusterRole grants exactly that.

Answers are cached for ``ttl`` seconds per token and per user, as the delegating authenticator and
authorizer cache theirs, so a scrape every few seconds costs the API server little. kadmit needs
``create`` on ``tokenreviews`` and ``subjectaccessreviews`` (``kadmit-metrics-auth-role``).
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from aiohttp import web

from kadmit.certs.authority import issue_ca, issue_serving
from kadmit.kube import ApiError, Client, Obj
from kadmit.kube.resources import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from kadmit.webhook.tls import ServingTLS, TLSOptions

logger = logging.getLogger(__name__)
METRICS_SERVICE = "kadmit-controller-manager-metrics-service"
DEFAULT_TTL = 10.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
K = TypeVar("K")
V = TypeVar("V")


def self_signed_context(
    namespace: str, service: str = METRICS_SERVICE, *, options: TLSOptions | None = None
) -> ssl.SSLContext:
    """A TLS context serving a fresh self-signed certificate for the metrics Service's names, with
    the configuration's ``tls`` options (Kueue applies them to its metrics server too)."""
    ca = issue_ca("kadmit-metrics-ca")
    pair = issue_serving(ca, service, namespace)
    tls = ServingTLS(options)
    tls.load(pair.cert_pem + ca.cert_pem, pair.key_pem)
    return tls.context


@dataclass(frozen=True)
class Caller:
    """Who a token belongs to, as the TokenReview answered."""

    username: str
    uid: str
    groups: tuple[str, ...]


class MetricsAuth:
    """Authenticate with TokenReview, authorize with SubjectAccessReview, both cached."""

    def __init__(
        self, client: Client, *, ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.client = client
        self.ttl = ttl
        self.clock = clock
        self._tokens: dict[str, tuple[float, Caller | None]] = {}
        self._decisions: dict[tuple[Caller, str, str], tuple[float, bool]] = {}

    def middleware(self) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
        @web.middleware
        async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
            refusal = await self.refusal(request)
            return refusal if refusal is not None else await handler(request)

        return check

    async def refusal(self, request: web.Request) -> web.Response | None:
        """None when the request may go on; else the 401 or 403 (or 500 when the API fails) to send."""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return web.Response(status=401, text="Unauthorized\n")
        try:
            caller = await self.authenticate(token)
            if caller is None:
                return web.Response(status=401, text="Unauthorized\n")
            if not await self.authorize(caller, request.method.lower(), request.path):
                return web.Response(status=403, text=f"Authorization denied for user {caller.username}\n")
        except ApiError as exc:
            logger.warning("metrics authentication/authorization failed: %s", exc)
            return web.Response(status=500, text=f"Internal Server Error: {exc}\n")
        return None

    async def authenticate(self, token: str) -> Caller | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        cached = self._tokens.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        review: Obj = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        answer = await self.client.create(TOKEN_REVIEWS, review)
        status = answer.get("status") or {}
        caller: Caller | None = None
        if status.get("authenticated"):
            user = status.get("user") or {}
            caller = Caller(
                str(user.get("username", "")),
                str(user.get("uid", "")),
                tuple(str(g) for g in user.get("groups") or []),
            )
        self._remember(self._tokens, key, (now + self.ttl, caller))
        return caller

    async def authorize(self, caller: Caller, verb: str, path: str) -> bool:
        key = (caller, verb, path)
        now = self.clock()
        cached = self._decisions.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        spec: Obj = {
            "user": caller.username,
            "groups": list(caller.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if caller.uid:
            spec["uid"] = caller.uid
        review: Obj = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        answer = await self.client.create(SUBJECT_ACCESS_REVIEWS, review)
        allowed = bool((answer.get("status") or {}).get("allowed"))
        self._remember(self._decisions, key, (now + self.ttl, allowed))
        return allowed

    def _remember(self, table: dict[K, tuple[float, V]], key: K, value: tuple[float, V]) -> None:
        if len(table) > 1024:  # a flood of made-up tokens must not grow the cache without bound
            now = self.clock()
            for stale in [k for k, (expiry, _) in table.items() if expiry <= now] or list(table):
                del table[stale]
        table[key] = value
