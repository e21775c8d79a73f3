"""The TokenRequest API: ``POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token``.

What ``kubectl create token`` calls, and how a process outside the server (``kadmit local``'s
controllers) gets a ServiceAccount's token over HTTPS. It answers as kube-apiserver's
``serviceaccount/storage/token.go`` does: 404 when the ServiceAccount does not exist, the
request's own name and namespace checked against the URL, ``expirationSeconds`` defaulted to an
hour and kept between ten minutes and 2^32 seconds, a bound object (Pod, Secret or Node) that
must exist, and the token with its expiry in ``status``. The token itself is an opaque random
string in the server's token table (no JWT), and the local cluster does not expire it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from kadmit.localcluster.errors import bad_request, conflict, invalid, invalid_value, not_found
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.store import Store
from kadmit.localcluster.timestamps import format_time

GROUP = "authentication.k8s.io"
API_VERSION = f"{GROUP}/v1"
KIND = "TokenRequest"
DEFAULT_SECONDS = 3600
MIN_SECONDS = 600
MAX_SECONDS = 1 << 32
# What a kube-apiserver without --api-audiences puts in a token that names no audience.
DEFAULT_AUDIENCES = ("https://kubernetes.default.svc.cluster.local",)
# The kinds a token may be bound to, and where they are stored (namespaced or not).
BINDABLE = {"Pod": ("pods", True), "Secret": ("secrets", True), "Node": ("nodes", False)}

Mint = Callable[[str, str, str], str]
"""``(namespace, name, uid) -> token`` for that ServiceAccount."""


def token_request(
    body: Any, namespace: str, name: str, store: Store, mint: Mint, now: datetime | None = None
) -> Obj:
    """The TokenRequest the server answers ``body`` with (201); a refusal raises its ``ApiError``."""
    request = _decode(body)
    meta = request["metadata"]
    if meta.get("name") and meta["name"] != name:
        why = "must match the service account name if specified"
        raise invalid(KIND, name, [invalid_value("metadata.name", meta["name"], why)], GROUP)
    if meta.get("namespace") and meta["namespace"] != namespace:
        why = "must match the service account namespace if specified"
        raise invalid(KIND, name, [invalid_value("metadata.namespace", meta["namespace"], why)], GROUP)
    spec = request["spec"]
    seconds = spec.setdefault("expirationSeconds", DEFAULT_SECONDS)
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise bad_request(f"spec.expirationSeconds must be an integer, got {seconds!r}")
    if seconds < MIN_SECONDS:
        why = "may not specify a duration less than 10 minutes"
        raise invalid(KIND, name, [invalid_value("spec.expirationSeconds", seconds, why)], GROUP)
    if seconds > MAX_SECONDS:
        why = "may not specify a duration larger than 2^32 seconds"
        raise invalid(KIND, name, [invalid_value("spec.expirationSeconds", seconds, why)], GROUP)
    account = store.get("", "serviceaccounts", namespace, name)
    if account is None:
        raise not_found("serviceaccounts", name, "", "serviceaccounts")
    if spec.get("boundObjectRef"):
        _check_bound_object(spec["boundObjectRef"], namespace, store)
    if not spec.get("audiences"):
        spec["audiences"] = list(DEFAULT_AUDIENCES)
    moment = (now or datetime.now(UTC)).replace(microsecond=0)
    meta.update(name=name, namespace=namespace, creationTimestamp=format_time(moment))
    request["status"] = {
        "token": mint(namespace, name, str(account["metadata"]["uid"])),
        "expirationTimestamp": format_time(moment + timedelta(seconds=seconds)),
    }
    return request


def _decode(body: Any) -> Obj:
    if not isinstance(body, dict):
        raise bad_request("a TokenRequest must be a JSON object")
    if body.get("apiVersion") not in (None, "", API_VERSION):
        raise bad_request(
            f"the API version in the data ({body['apiVersion']}) does not match the expected API version "
            f"({API_VERSION})"
        )
    if body.get("kind") not in (None, "", KIND):
        raise bad_request(f"the kind in the data ({body['kind']}) does not match the expected kind ({KIND})")
    for key in ("metadata", "spec"):
        if not isinstance(body.get(key) or {}, dict):
            raise bad_request(f"{key} must be an object")
    return {
        "kind": KIND,
        "apiVersion": API_VERSION,
        "metadata": dict(body.get("metadata") or {}),
        "spec": dict(body.get("spec") or {}),
    }


def _check_bound_object(ref: Any, namespace: str, store: Store) -> None:
    """The object a token is bound to must exist (and be the one named by uid, when given)."""
    if not isinstance(ref, dict):
        raise bad_request("spec.boundObjectRef must be an object")
    kind, api_version = ref.get("kind"), ref.get("apiVersion") or "v1"
    if api_version != "v1" or kind not in BINDABLE:
        raise bad_request(f"cannot bind token for object of type {api_version}, Kind={kind}")
    plural, namespaced = BINDABLE[kind]
    bound_name = str(ref.get("name") or "")
    found = store.get("", plural, namespace if namespaced else None, bound_name)
    if found is None:
        raise not_found(plural, bound_name, "", plural)
    uid = ref.get("uid")
    if uid and uid != found["metadata"].get("uid"):
        why = (
            f"the UID in the bound object reference ({uid}) does not match the UID in record. "
            "The object might have been deleted and then recreated"
        )
        raise conflict(kind, bound_name, why)

