"""Converting custom resources between versions, as apiextensions-apiserver does.

``strategy: None`` only rewrites ``apiVersion``. ``strategy: Webhook`` POSTs a ConversionReview
to the CRD's ``spec.conversion.webhook.clientConfig`` (Kueue's ``/convert``) and checks the
answer the way the real server does: same uid, ``result.status: Success``, one object back per
object sent, in the desired version, same kind, name, namespace and uid. Metadata other than
labels and annotations is restored from the original, so a webhook cannot rewrite it.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from kadmit.localcluster.errors import ApiError, internal_error
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.webhookclient import ServiceResolver, WebhookCallError, WebhookClient, review_problem

# kube-apiserver gives conversion webhooks 30 seconds.
CONVERSION_TIMEOUT_SECONDS = 30
_SUPPORTED_REVIEW_VERSIONS = ("v1", "v1beta1")


class ConversionError(ApiError):
    """A conversion that failed: ``cause`` says why, ``status`` is the 500 the API server answers with.

    It is an :class:`~localcluster.errors.ApiError`, so the request handlers pass it to the client as is.
    """

    def __init__(self, cause: str) -> None:
        super().__init__(internal_error(cause).status)
        self.cause = cause


def _gvk(obj: Obj) -> str:
    """``schema.GroupVersionKind.String()``, e.g. ``kueue.x-k8s.io/v1beta1, Kind=ClusterQueue``."""
    return f"{obj.get('apiVersion', '')}, Kind={obj.get('kind', '')}"


async def convert_objects(
    crd: Obj,
    objects: list[Obj],
    desired_api_version: str,
    service_resolver: ServiceResolver | None = None,
    *,
    client: WebhookClient | None = None,
) -> list[Obj]:
    """Return ``objects`` converted to ``desired_api_version`` (new dicts; the inputs are untouched).

    Pass a long-lived ``client`` to reuse its HTTPS session; without one a session is opened
    for this call only.
    """
    spec = crd.get("spec") or {}
    group = spec.get("group", "")
    served = {str(version.get("name")) for version in spec.get("versions") or []}
    desired_group, _, desired_version = desired_api_version.rpartition("/")
    if desired_group != group or desired_version not in served:
        raise ConversionError(
            f'"{desired_api_version}" is not a version of {spec.get("names", {}).get("kind", group)}'
        )
    pending = [index for index, obj in enumerate(objects) if obj.get("apiVersion") != desired_api_version]
    converted = [copy.deepcopy(obj) for obj in objects]
    if not pending:
        return converted
    conversion = spec.get("conversion") or {}
    if conversion.get("strategy", "None") == "None":
        for index in pending:
            converted[index]["apiVersion"] = desired_api_version
        return converted
    if conversion.get("strategy") != "Webhook":
        raise ConversionError(f'unknown conversion strategy "{conversion.get("strategy")}"')
    described = _gvk(objects[pending[0]])
    webhook = conversion.get("webhook") or {}
    results = await _call_webhook(
        webhook, [objects[i] for i in pending], desired_api_version, described, service_resolver, client
    )
    if len(results) != len(pending):
        raise ConversionError(
            f"conversion webhook for {described} returned {len(results)} objects, expected {len(pending)}"
        )
    for position, (index, result) in enumerate(zip(pending, results, strict=True)):
        converted[index] = _checked(objects[index], result, desired_api_version, described, position)
    return converted


async def _call_webhook(
    webhook: Obj,
    objects: list[Obj],
    desired_api_version: str,
    described: str,
    service_resolver: ServiceResolver | None,
    client: WebhookClient | None,
) -> list[Any]:
    versions = webhook.get("conversionReviewVersions") or []
    review_version = next((v for v in versions if v in _SUPPORTED_REVIEW_VERSIONS), None)
    if review_version is None:
        raise ConversionError(
            f"conversion webhook for {described} failed: "
            f"none of {versions} are supported ConversionReview versions"
        )
    api_version = f"apiextensions.k8s.io/{review_version}"
    uid = str(uuid.uuid4())
    review = {
        "apiVersion": api_version,
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired_api_version, "objects": objects},
    }
    owned = client is None
    caller = client or WebhookClient(service_resolver)
    try:
        target = caller.target(webhook.get("clientConfig") or {}, CONVERSION_TIMEOUT_SECONDS)
        answer = await caller.post(target, review)
    except WebhookCallError as exc:
        reason = exc.reason.removeprefix("failed to call webhook: ")
        raise ConversionError(f"conversion webhook for {described} failed: {reason}") from None
    finally:
        if owned:
            await caller.close()
    problem = _verify(answer, uid, api_version)
    if problem:
        raise ConversionError(f"conversion webhook for {described} failed: {problem}")
    converted: list[Any] = answer["response"].get("convertedObjects") or []
    return converted


def _verify(answer: Obj, uid: str, api_version: str) -> str | None:
    problem = review_problem(answer, "ConversionReview", api_version, uid, "no response provided")
    if problem is not None:
        return problem
    response = answer["response"]
    result = response.get("result") or {}
    if result.get("status") != "Success":
        if result.get("message"):
            return str(result["message"])
        return f"response.result.status was '{result.get('status', '')}', not 'Success'"
    if not isinstance(response.get("convertedObjects") or [], list):
        return "response.convertedObjects must be a list"
    return None


def _checked(original: Obj, result: Any, desired_api_version: str, described: str, position: int) -> Obj:
    prefix = f"conversion webhook for {described} returned invalid converted object at index {position}"
    if not isinstance(result, dict):
        raise ConversionError(f"{prefix}: not an object")
    if result.get("apiVersion") != desired_api_version:
        raise ConversionError(
            f"{prefix}: invalid groupVersion "
            f"(expected {desired_api_version}, received {result.get('apiVersion', '')})"
        )
    if result.get("kind") != original.get("kind"):
        raise ConversionError(
            f"{prefix}: invalid kind (expected {original.get('kind')}, received {result.get('kind')})"
        )
    before = original.get("metadata") or {}
    after = result.get("metadata") or {}
    if not isinstance(after, dict):
        raise ConversionError(f"{prefix}: metadata must be an object")
    for field, label in (("name", "name"), ("namespace", "namespace"), ("uid", "UID")):
        if before.get(field, "") != after.get(field, ""):
            raise ConversionError(
                f"{prefix}: must have the same {label}: {before.get(field, '')} != {after.get(field, '')}"
            )
    metadata = copy.deepcopy(before)
    for field in ("labels", "annotations"):
        values = after.get(field)
        if values is not None and (
            not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values())
        ):
            raise ConversionError(
                f"conversion webhook for {described} returned invalid metadata in object "
                f"at index {position}: {field} must be a map of strings"
            )
        if values:
            metadata[field] = dict(values)
        else:
            metadata.pop(field, None)
    converted = copy.deepcopy(result)
    converted["metadata"] = metadata
    return converted
