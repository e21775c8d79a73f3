"""The aiohttp application: URL layout, query parameters, bodies and headers of the real API.

Requests are routed by parsing ``/api/v1/...`` and ``/apis/{group}/{version}/...`` by hand (the
resource set changes as CRDs come and go), then handed to :class:`~localcluster.api.Api`.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kadmit.localcluster import discovery, openapi, protobuf, tables
from kadmit.localcluster.aggregation import Aggregator
from kadmit.localcluster.api import Api, FieldValidation, Outcome, WriteOptions
from kadmit.localcluster.auth import (
    ADMIN,
    AUTHENTICATED,
    SA_PREFIX,
    TokenAuthenticator,
    User,
    service_account_user,
)
from kadmit.localcluster.errors import (
    ApiError,
    bad_request,
    invalid,
    method_not_allowed,
    not_found,
    path_not_found,
    required,
    status,
    unauthorized,
)
from kadmit.localcluster.objects import Obj, dumps, loads
from kadmit.localcluster.rbac import (
    Attributes,
    AuditLog,
    Authorizer,
    access_review,
    forbidden,
    request_attributes,
    rules_review,
)
from kadmit.localcluster.resources import ResourceType
from kadmit.localcluster.selectors import (
    COMMON_FIELDS,
    EXTRA_FIELDS,
    parse_field_selector,
    parse_label_selector,
)
from kadmit.localcluster.tokenrequest import token_request
from kadmit.localcluster.watch import WatchParams, serve_watch

log = logging.getLogger(__name__)
Middleware = Callable[..., Any]

API_KEY = web.AppKey("api", Api)
USER_KEY = web.RequestKey("user", User)  # who sent the request, set by the front middleware
PROTOBUF = "application/vnd.kubernetes.protobuf"
POD_ACTIONS = ("binding", "eviction")  # POST-only subresources of pods
TOKEN = "token"  # serviceaccounts/token: the TokenRequest API
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/livez", "/version"})
IMPERSONATE_USER = "Impersonate-User"
IMPERSONATE_GROUP = "Impersonate-Group"
IMPERSONATE_UID = "Impersonate-Uid"
AUTHZ = "authorization.k8s.io"
REVIEWS = {
    (AUTHZ, "selfsubjectaccessreviews"),
    (AUTHZ, "subjectaccessreviews"),
    (AUTHZ, "localsubjectaccessreviews"),
    (AUTHZ, "selfsubjectrulesreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authentication.k8s.io", "tokenreviews"),
}
# What a TokenReview answers when the request names no audiences: the server's own.
API_AUDIENCES = ["https://kubernetes.default.svc.cluster.local"]
VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-kadmit-local",
    "gitCommit": "",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
}


RECORDED_REQUESTS = 10_000
"""The latest requests a server keeps, bodies included, for tests to look at."""


@dataclass
class RecordedRequest:
    """One request as the server saw it, for tests that check what a client sent."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: bytes
    status: int


@dataclass
class Target:
    """What a resource URL points at."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str


def true(value: str | None) -> bool:
    """Booleans as Go parses them; kubernetes-asyncio sends Python's ``True``."""
    return value is not None and value.lower() in ("true", "1", "t")


def json_response(
    body: Any, code: int = 200, content_type: str = "application/json", warnings: Sequence[str] = ()
) -> web.Response:
    response = web.Response(body=dumps(body), status=code, content_type=content_type.split(";")[0])
    if ";" in content_type:
        response.headers["Content-Type"] = content_type
    for warning in warnings:
        response.headers.add("Warning", '299 - "' + warning.replace('"', "'") + '"')
    return response


class ApiServer:
    """Builds the aiohttp application around one :class:`Api`."""

    def __init__(
        self,
        api: Api,
        *,
        token: str | None = None,
        authenticator: TokenAuthenticator | None = None,
        middlewares: Sequence[Middleware] = (),
        bookmark_interval: float = 5.0,
        record_requests: int = RECORDED_REQUESTS,
        aggregator: Aggregator | None = None,
        authorizer: Authorizer | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        """``aggregator`` proxies the group versions that APIServices send to a Service;
        ``authorizer`` None serves every authenticated request (``--authorization-mode=AlwaysAllow``)."""
        self.api = api
        self.aggregator = aggregator
        self.auth = authenticator or TokenAuthenticator(token)
        self.authorizer = authorizer
        self.audit = audit or AuditLog()
        self.bookmark_interval = bookmark_interval
        self.requests: deque[RecordedRequest] = deque(maxlen=record_requests)
        self.app = web.Application(
            middlewares=[*middlewares, self._front],
            client_max_size=64 * 1024 * 1024,
        )
        self.app[API_KEY] = api
        router = self.app.router
        router.add_get("/version", self._version)
        router.add_get("/version/", self._version)
        for probe in ("/healthz", "/readyz", "/livez"):
            router.add_get(probe, self._ok)
        router.add_get("/openapi/v3", self._openapi_root)
        router.add_get("/openapi/v3/{path:.*}", self._openapi_doc)
        router.add_get("/openapi/v2", self._openapi_v2)
        router.add_get("/api", self._core_versions)
        router.add_get("/api/", self._core_versions)
        router.add_get("/apis", self._groups)
        router.add_get("/apis/", self._groups)
        router.add_route("*", "/api/{path:.+}", self._resource)
        router.add_route("*", "/apis/{path:.+}", self._resource)

    # -- middlewares ------------------------------------------------------------------------

    @web.middleware
    async def _front(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Authentication, ``Status`` errors and the request record, in one pass (it is on every request)."""
        body = await request.read() if request.can_read_body else b""
        response: web.StreamResponse
        try:
            user = self.auth.authenticate(request.headers.get("Authorization", ""))
            public = request.path in PUBLIC_PATHS
            if user is None and not public:
                raise unauthorized()
            user = user or ADMIN
            if IMPERSONATE_USER in request.headers or IMPERSONATE_GROUP in request.headers:
                user = self._impersonate(request, user)
            request[USER_KEY] = user
            if self.authorizer is not None and not public:
                self._authorize(request, user)
            response = await handler(request)
        except ApiError as exc:
            response = json_response(exc.status, exc.code)
        except web.HTTPException as exc:
            self._remember(request, body, exc.status)
            raise
        except Exception as exc:
            log.exception("internal error serving %s %s", request.method, request.path)
            response = json_response(status(500, "InternalError", f"an error on the server: {exc}"), 500)
        self._remember(request, body, response.status)
        return response

    def _authorize(self, request: web.Request, user: User) -> None:
        """Refuse (403) what the user's roles do not allow; record every decision in ``audit``."""
        assert self.authorizer is not None
        attrs = request_attributes(request.method, request.path, request.query)
        allowed, reason = self.authorizer.authorize(user, attrs)
        self.audit.record(user, attrs, allowed)
        if not allowed:
            raise forbidden(user, attrs, reason)

    def _impersonate(self, request: web.Request, requestor: User) -> User:
        """``kubectl --as``: act as another user when the requestor may ``impersonate`` it and its
        groups (``apiserver/pkg/endpoints/filters/impersonation.go``)."""
        username = request.headers.get(IMPERSONATE_USER, "")
        groups = request.headers.getall(IMPERSONATE_GROUP, [])
        uid = request.headers.get(IMPERSONATE_UID, "")
        if not username:
            raise bad_request(
                f"requested {[{'Kind': 'Group', 'Name': g} for g in groups]} without impersonating a user"
            )
        checks: list[Attributes] = []
        extra_groups: tuple[str, ...] = ()
        if username.startswith(SA_PREFIX) and username.count(":") == 3:
            namespace, name = username[len(SA_PREFIX) :].split(":")
            checks.append(
                Attributes("impersonate", True, "", "", "v1", "serviceaccounts", "", namespace, name)
            )
            extra_groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
        else:
            checks.append(Attributes("impersonate", True, "", "", "v1", "users", "", "", username))
        checks += [Attributes("impersonate", True, "", "", "v1", "groups", "", "", g) for g in groups]
        if uid:
            checks.append(
                Attributes("impersonate", True, "", "authentication.k8s.io", "v1", "uids", "", "", uid)
            )
        if self.authorizer is not None:
            for attrs in checks:
                allowed, reason = self.authorizer.authorize(requestor, attrs)
                self.audit.record(requestor, attrs, allowed)
                if not allowed:
                    raise forbidden(requestor, attrs, reason)
        all_groups = [*groups, *(g for g in extra_groups if g not in groups)]
        if username != "system:anonymous" and AUTHENTICATED not in all_groups:
            all_groups.append(AUTHENTICATED)
        return User(username, uid, tuple(all_groups))

    def _remember(self, request: web.Request, body: bytes, code: int) -> None:
        if not self.requests.maxlen:
            return
        content_type = request.headers.get("Content-Type", "")
        self.requests.append(
            RecordedRequest(request.method, request.path, dict(request.query), content_type, body, code)
        )

    # -- discovery and friends --------------------------------------------------------------

    async def _version(self, request: web.Request) -> web.Response:
        return json_response(VERSION)

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _core_versions(self, request: web.Request) -> web.Response:
        media = discovery.wants_aggregated(request.headers.get("Accept", ""))
        if media:
            return json_response(
                discovery.aggregated(self.api.registry, core=True, media=media), content_type=media
            )
        return json_response(discovery.api_versions())

    async def _groups(self, request: web.Request) -> web.Response:
        media = discovery.wants_aggregated(request.headers.get("Accept", ""))
        if media:
            document = discovery.aggregated(self.api.registry, core=False, media=media)
            if self.aggregator is not None:
                document["items"] += await self.aggregator.discovery_items()
            return json_response(document, content_type=media)
        groups = discovery.api_group_list(self.api.registry)
        if self.aggregator is not None:
            served = {g["name"] for g in groups["groups"]}
            groups["groups"] += [
                self.aggregator.group_document(name)
                for name, _ in self.aggregator.groups()
                if name not in served
            ]
        return json_response(groups)

    async def _openapi_root(self, request: web.Request) -> web.Response:
        return json_response(openapi.root(self.api.registry))

    async def _openapi_doc(self, request: web.Request) -> web.Response:
        path = request.match_info["path"].strip("/")
        parts = path.split("/")
        if parts[0] == "api" and len(parts) == 2:
            group, version = "", parts[1]
        elif parts[0] == "apis" and len(parts) == 3:
            group, version = parts[1], parts[2]
        else:
            raise path_not_found(request.path)
        doc = openapi.document(self.api.registry, group, version)
        if doc is None:
            raise path_not_found(request.path)
        return json_response(doc)

    async def _openapi_v2(self, request: web.Request) -> web.Response:
        raise path_not_found(request.path)

    # -- resources --------------------------------------------------------------------------

    def _parse(self, request: web.Request) -> tuple[str, str, list[str]]:
        parts = [p for p in request.path.split("/") if p]
        if parts[0] == "api":
            if len(parts) < 2:
                raise path_not_found(request.path)
            return "", parts[1], parts[2:]
        if len(parts) < 3:
            group = parts[1]
            doc = discovery.api_group(self.api.registry, group)
            if doc is None and self.aggregator is not None:
                doc = self.aggregator.group_document(group)
            if doc is None or len(parts) != 2:
                raise path_not_found(request.path)
            raise _Respond(json_response(doc))
        return parts[1], parts[2], parts[3:]

    def _target(self, request: web.Request, group: str, version: str, rest: list[str]) -> Target:
        registry = self.api.registry
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise path_not_found(request.path)
        rt = registry.lookup(group, version, rest[0])
        if rt is None:
            raise path_not_found(request.path)
        if namespace is not None and not rt.namespaced:
            raise path_not_found(request.path)
        name = rest[1] if len(rest) > 1 else None
        if name is not None and rt.namespaced and namespace is None:
            raise path_not_found(request.path)
        subresource = rest[2] if len(rest) > 2 else ""
        if (
            subresource
            and (subresource != "status" or not rt.status)
            and not (rt.key == ("", "namespaces") and subresource == "finalize")
            and not (rt.key == ("", "pods") and subresource in POD_ACTIONS)
            and not (rt.key == ("", "serviceaccounts") and subresource == TOKEN)
        ):
            raise path_not_found(request.path)
        return Target(rt, namespace, name, subresource)

    async def _resource(self, request: web.Request) -> web.StreamResponse:
        if self.aggregator is not None and request.path.startswith("/apis/"):
            parts = [p for p in request.path.split("/") if p]
            apiservice = self.aggregator.claims(parts[1], parts[2]) if len(parts) >= 3 else None
            if apiservice is not None:
                return await self.aggregator.proxy(request, apiservice, _user(request), await request.read())
        try:
            group, version, rest = self._parse(request)
        except _Respond as answer:
            return answer.response
        if not rest:
            doc = discovery.api_resource_list(self.api.registry, group, version)
            if doc is None or request.method != "GET":
                raise path_not_found(request.path)
            return json_response(doc)
        target = self._target(request, group, version, rest)
        method = request.method
        if target.subresource == TOKEN:
            if method != "POST":
                raise method_not_allowed(
                    f"the server does not allow this method on the requested resource ({method})"
                )
            assert target.namespace is not None and target.name is not None
            minted = token_request(
                await _body(request), target.namespace, target.name, self.api.store, self._mint_for_account
            )
            return json_response(minted, 201)
        if method == "GET":
            if target.name is None or (true(request.query.get("watch")) and not target.subresource):
                return await self._list_or_watch(request, target)
            obj = self.api.get_stored(target.rt, target.namespace, target.name)
            obj = (await self.api.to_version(target.rt, [obj]))[0]
            if tables.wants_table(request.headers.get("Accept", "")):
                return json_response(tables.table(target.rt, [obj], str(self.api.store.resource_version)))
            return json_response(obj)
        if method == "POST" and target.name is not None and target.subresource in POD_ACTIONS:
            opts = self._write_options(request, None)
            body = await _body(request)
            if target.subresource == "binding":
                await self.api.bind(target.namespace, target.name, body, opts)
            else:
                await self.api.evict(target.namespace, target.name, body, opts)
            return json_response(_success(), 201)
        if target.subresource in POD_ACTIONS:
            raise method_not_allowed(f"pods/{target.subresource} only accepts POST")
        if method == "POST" and target.name is None and target.rt.key in REVIEWS:
            return json_response(self._review(target, await _body(request), _user(request)), 201)
        if method == "POST" and target.name is None:
            outcome = await self.api.create(
                target.rt, target.namespace, await _body(request), self._write_options(request, None)
            )
            return json_response(outcome.object, 201, warnings=outcome.warnings)
        if method == "PUT" and target.name is not None:
            outcome = await self.api.update(
                target.rt,
                target.namespace,
                target.name,
                await _body(request),
                _subresource(target),
                self._write_options(request, None),
            )
            return json_response(outcome.object, warnings=outcome.warnings)
        if method == "PATCH" and target.name is not None and _is_apply(request):
            if not request.query.get("fieldManager"):
                raise invalid(
                    "PatchOptions",
                    "",
                    [required("fieldManager", "is required for apply patch")],
                    "meta.k8s.io",
                )
            outcome = await self.api.apply(
                target.rt,
                target.namespace,
                target.name,
                await request.read(),
                _subresource(target),
                self._write_options(request, None),
            )
            return json_response(outcome.object, 201 if outcome.created else 200, warnings=outcome.warnings)
        if method == "PATCH" and target.name is not None:
            outcome = await self.api.patch(
                target.rt,
                target.namespace,
                target.name,
                request.headers.get("Content-Type", ""),
                await request.read(),
                _subresource(target),
                self._write_options(request, None),
            )
            return json_response(outcome.object, warnings=outcome.warnings)
        if method == "DELETE" and not target.subresource:
            raw = await request.read()
            options = await _body(request) if raw.strip() else {}
            if not isinstance(options, dict):
                raise bad_request("DeleteOptions must be a JSON object")
            opts = self._write_options(request, options)
            if target.name is None:
                return await self._delete_collection(request, target, opts)
            outcome = await self.api.delete(target.rt, target.namespace, target.name, opts)
            return json_response(outcome.object, 200 if _gone(outcome) else 202, warnings=outcome.warnings)
        raise method_not_allowed(
            f"the server does not allow this method on the requested resource ({method})"
        )

    # -- the reviews: who am I, may I, may they, who is this ---------------------------------

    def _review(self, target: Target, body: Any, user: User) -> Obj:
        plural = target.rt.key[1]
        if plural == "selfsubjectreviews":
            return _who_am_i(body, user)
        if plural == "tokenreviews":
            return self._token_review(body)
        authorizer = self.authorizer or Authorizer(self.api.store, always_allow=True)
        if plural == "selfsubjectrulesreviews":
            return rules_review(body, authorizer, user)
        kind = target.rt.kind
        if plural == "localsubjectaccessreviews" and isinstance(body, dict):
            attributes = (body.get("spec") or {}).get("resourceAttributes")
            if not isinstance(attributes, dict) or attributes.get("namespace", "") != target.namespace:
                raise bad_request(
                    f"spec.resourceAttributes.namespace must match metadata.namespace: {target.namespace}"
                )
        return access_review(body, kind, authorizer, user if plural == "selfsubjectaccessreviews" else None)

    def _token_review(self, review: Any) -> Obj:
        """TokenReview: who a bearer token authenticates as (what a webhook or a metrics endpoint
        behind ``--authentication-kubeconfig`` asks the API server)."""
        if not isinstance(review, dict) or not isinstance(review.get("spec"), dict):
            raise bad_request("a TokenReview needs a spec")
        spec = review["spec"]
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise bad_request("spec.token: Required value: token must be set")
        audiences = spec.get("audiences") or API_AUDIENCES
        user = self.auth.lookup(token)
        answer: Obj
        if user is None:
            answer = {
                "authenticated": False,
                "user": {},
                "error": "[invalid bearer token, token lookup failed]",
            }
        else:
            answer = {"authenticated": True, "user": user.info(), "audiences": list(audiences)}
        return {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "metadata": {**(review.get("metadata") or {}), "creationTimestamp": None},
            "spec": spec,
            "status": answer,
        }

    # -- service-account tokens -------------------------------------------------------------

    def service_account_token(self, namespace: str, name: str) -> str:
        """A new token for ``system:serviceaccount:<namespace>:<name>``, as TokenRequest mints them.

        The uid is the stored ServiceAccount's when it exists, as in a real token's claims (the
        HTTP API refuses an account that does not exist; tests may mint for one ahead of time).
        """
        stored = self.api.store.get("", "serviceaccounts", namespace, name)
        uid = str(stored["metadata"]["uid"]) if stored is not None else str(uuid.uuid4())
        return self._mint_for_account(namespace, name, uid)

    def _mint_for_account(self, namespace: str, name: str, uid: str) -> str:
        return self.auth.mint(service_account_user(namespace, name, uid))

    def _write_options(self, request: web.Request, options: Obj | None) -> WriteOptions:
        query = request.query
        field_manager = request.headers.get("User-Agent", "").split("/", 1)[0]
        if not query and not options:  # most writes: every option at its default
            return WriteOptions(
                dry_run=False, field_validation="Warn", options=None, user=_user(request).info(),
                field_manager=field_manager, force=False,
            )
        options = dict(options or {})
        for key in ("propagationPolicy",):
            if key in query:
                options[key] = query[key]
        if "orphanDependents" in query:
            options["orphanDependents"] = true(query["orphanDependents"])
        if "gracePeriodSeconds" in query:
            try:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            except ValueError:
                raise bad_request(f"invalid gracePeriodSeconds: {query['gracePeriodSeconds']!r}") from None
        dry_run = query.getall("dryRun", []) + list(options.get("dryRun") or [])
        for value in dry_run:
            if value != "All":
                raise bad_request(f'dryRun: Unsupported value: "{value}": supported values: "All"')
        validation = query.get("fieldValidation", "Warn") or "Warn"
        if validation not in ("Strict", "Warn", "Ignore"):
            raise bad_request(
                f'fieldValidation: Unsupported value: "{validation}": supported values: "Ignore", '
                '"Strict", "Warn"'
            )
        field_validation: FieldValidation = validation  # type: ignore[assignment]
        force = query.get("force", "")
        if force and not _is_apply(request):
            raise bad_request("force: Invalid value: true: may not be specified for non-apply patch")
        return WriteOptions(
            dry_run=bool(dry_run),
            field_validation=field_validation,
            options=options or None,
            user=_user(request).info(),
            field_manager=query.get("fieldManager") or field_manager,
            force=true(force),
        )

    def _selectors(self, request: web.Request, rt: ResourceType) -> tuple[Any, Any]:
        label = parse_label_selector(request.query.get("labelSelector", ""))
        allowed = COMMON_FIELDS + EXTRA_FIELDS.get(rt.key, ())
        if rt.crd is not None:
            for version in rt.crd["spec"].get("versions", []):
                if version.get("name") == rt.version:
                    allowed += tuple(f["jsonPath"].lstrip(".") for f in version.get("selectableFields") or [])
        field = parse_field_selector(request.query.get("fieldSelector", ""), allowed)
        return label, field

    async def _list_or_watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        rt = target.rt
        query = request.query
        label, field = self._selectors(request, rt)
        if target.name is not None:  # the deprecated watch of one object by its path
            named = parse_field_selector(f"metadata.name={target.name}", COMMON_FIELDS)
            field = named if field is None else _both(field, named)
        if true(query.get("watch")):
            timeout = query.get("timeoutSeconds")
            params = WatchParams(
                namespace=target.namespace,
                label=label,
                field=field,
                resource_version=query.get("resourceVersion", ""),
                timeout=_non_negative(timeout, "timeoutSeconds") if timeout else None,
                bookmarks=true(query.get("allowWatchBookmarks")),
                send_initial_events=true(query.get("sendInitialEvents")),
            )
            return await serve_watch(request, self.api, rt, params, self.bookmark_interval)
        store = self.api.store
        objects = store.list(rt.group, rt.plural, target.namespace if rt.namespaced else None)
        if label is not None or field is not None:
            objects = [o for o in objects if (label is None or label(o)) and (field is None or field(o))]
        list_rv = str(store.resource_version)
        meta: Obj = {"resourceVersion": list_rv}
        objects = _page(objects, query, meta)
        items = await self.api.to_version(rt, objects)
        if tables.wants_table(request.headers.get("Accept", "")):
            return json_response(tables.table(rt, items, list_rv, meta.get("continue")))
        return json_response(
            {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta, "items": items}
        )

    async def _delete_collection(
        self, request: web.Request, target: Target, opts: WriteOptions
    ) -> web.Response:
        rt = target.rt
        label, field = self._selectors(request, rt)
        objects = self.api.store.list(rt.group, rt.plural, target.namespace if rt.namespaced else None)
        deleted = []
        for obj in objects:
            if (label is None or label(obj)) and (field is None or field(obj)):
                try:
                    outcome = await self.api.delete(
                        rt, obj["metadata"].get("namespace"), obj["metadata"]["name"], opts
                    )
                except ApiError as exc:
                    if exc.code == 404:
                        continue
                    raise
                deleted.append(outcome.object)
        return json_response(
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(self.api.store.resource_version)},
                "items": deleted,
            }
        )


class _Respond(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


def _is_apply(request: web.Request) -> bool:
    return (
        request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        == "application/apply-patch+yaml"
    )


def _subresource(target: Target) -> str:
    return "" if target.subresource == "finalize" else target.subresource


def _gone(outcome: Outcome) -> bool:
    meta = outcome.object.get("metadata", {})
    return not meta.get("deletionTimestamp") or not (
        meta.get("finalizers") or (outcome.object.get("spec") or {}).get("finalizers")
    )


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        raise bad_request("the request body is empty")
    content_type = request.headers.get("Content-Type", "application/json").split(";")[0].strip()
    if content_type == PROTOBUF:  # kubectl's imperative commands (create job|namespace|quota|...)
        return protobuf.decode_body(raw)
    if content_type in ("application/yaml", "application/apply-patch+yaml"):
        import yaml

        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise bad_request(f"the request body is not valid YAML: {exc}") from None
    try:
        return loads(raw)
    except ValueError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None


def _page(objects: list[Obj], query: Any, meta: Obj) -> list[Obj]:
    """``limit`` / ``continue``: the token is the position after the last returned object."""
    start = 0
    token = query.get("continue")
    if token:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            after = (decoded["ns"], decoded["name"])
        except (ValueError, KeyError, TypeError):
            raise bad_request("continue key is not valid: illegal base64 data") from None
        start = next(
            (
                i
                for i, o in enumerate(objects)
                if (o["metadata"].get("namespace") or "", o["metadata"]["name"]) > after
            ),
            len(objects),
        )
    limit_text = query.get("limit")
    limit = int(_non_negative(limit_text, "limit")) if limit_text else 0
    if not limit:
        return objects[start:]
    page = objects[start : start + limit]
    if start + limit < len(objects):
        last = page[-1]["metadata"]
        meta["continue"] = base64.urlsafe_b64encode(
            json.dumps({"ns": last.get("namespace") or "", "name": last["name"]}).encode()
        ).decode()
        meta["remainingItemCount"] = len(objects) - start - limit
    return page


def _non_negative(text: str, name: str) -> float:
    """A numeric query parameter; anything else is a 400, as the real server's decoding makes it."""
    try:
        value = float(text) if name == "timeoutSeconds" else int(text)
    except ValueError:
        raise bad_request(f"{name}: invalid value {text!r}: must be a non-negative integer") from None
    if value < 0:
        raise bad_request(f"{name}: invalid value {text!r}: must be a non-negative integer")
    return value


def _both(first: Any, second: Any) -> Any:
    return lambda obj: first(obj) and second(obj)


def _success() -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _user(request: web.Request) -> User:
    user = request.get(USER_KEY)
    return user if isinstance(user, User) else ADMIN


def _who_am_i(review: Any, user: User) -> Obj:
    """SelfSubjectReview (``kubectl auth whoami``): the caller's identity as authentication saw it."""
    if not isinstance(review, dict):
        raise bad_request("a SelfSubjectReview must be a JSON object")
    metadata = review.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise bad_request("metadata must be an object")
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
        "metadata": {**metadata, "creationTimestamp": None},
        "status": {"userInfo": user.info()},
    }


__all__ = ["ApiServer", "RecordedRequest", "not_found"]
