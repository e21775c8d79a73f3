"""Dynamic admission: calling the webhooks of Mutating/ValidatingWebhookConfigurations.

This follows kube-apiserver's webhook dispatchers: configurations in name order, webhooks in
list order; rules (with matchPolicy Equivalent: other versions of a custom resource),
namespaceSelector, objectSelector and matchConditions decide who is called;
mutating webhooks run one after another, each seeing the previous one's patch, and those with
``reinvocationPolicy: IfNeeded`` run once more when a later webhook changed the object;
validating webhooks run concurrently. Messages and status codes are the real server's, so a
client (kubectl, kubernetes-asyncio, kadmit's tests) sees what it would see on a cluster.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

import jsonpatch
import jsonpointer

from kadmit.localcluster import cel, errors
from kadmit.localcluster.conversion import ConversionError, convert_objects
from kadmit.localcluster.interfaces import AdmissionError, AdmissionRequest, AdmissionResult, StoreView
from kadmit.localcluster.objects import Obj, copy_json
from kadmit.localcluster.selectors import SelectorError, label_selector_matches
from kadmit.localcluster.webhookclient import ServiceResolver, WebhookCallError, WebhookClient, review_problem

logger = logging.getLogger(__name__)

ADMISSION_GROUP = "admissionregistration.k8s.io"
CRD_GROUP = "apiextensions.k8s.io"
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"
NAME_LABEL = "kubernetes.io/metadata.name"
DEFAULT_TIMEOUT_SECONDS = 10
MAX_TIMEOUT_SECONDS = 30

# Webhooks are never called for the objects that configure admission, so a broken webhook
# cannot lock an administrator out of fixing it.
_EXEMPT_RESOURCES = frozenset(
    {
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings",
    }
)

_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
_SIDE_EFFECT_FREE_ON_DRY_RUN = {"None", "NoneOnDryRun"}


@dataclass(frozen=True)
class Webhook:
    """One webhook of one configuration; ``key`` identifies it across reinvocation rounds."""

    configuration: str
    index: int
    spec: Obj

    @property
    def key(self) -> tuple[str, int]:
        return (self.configuration, self.index)

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))

    @property
    def fails_open(self) -> bool:
        return bool(self.spec.get("failurePolicy", "Fail") == "Ignore")

    @property
    def timeout_seconds(self) -> int:
        value = self.spec.get("timeoutSeconds")
        seconds = DEFAULT_TIMEOUT_SECONDS if value is None else int(value)
        return min(max(seconds, 1), MAX_TIMEOUT_SECONDS)

    @property
    def reinvocable(self) -> bool:
        return self.spec.get("reinvocationPolicy") == "IfNeeded"


def internal_error(cause: str) -> AdmissionError:
    """What a failed call under failurePolicy Fail becomes."""
    return AdmissionError(errors.internal_error(cause).status)


def denial(webhook_name: str, result: Obj | None) -> AdmissionError:
    """``webhookerrors.ToStatusErr``: the webhook's own status, its message prefixed with who denied."""
    result = dict(result or {})
    denied_by = f'admission webhook "{webhook_name}" denied the request'
    code = result.get("code")
    if not isinstance(code, int) or code < 400:
        code = 403
    if result.get("message"):
        message = f"{denied_by}: {result['message']}"
    elif result.get("reason"):
        message = f"{denied_by}: {result['reason']}"
    else:
        message = f"{denied_by} without explanation"
    details = result.get("details") if isinstance(result.get("details"), dict) else None
    return AdmissionError(errors.status(code, str(result.get("reason") or ""), message, details))


def forbidden(request: AdmissionRequest, cause: str) -> AdmissionError:
    """``apierrors.NewForbidden`` for the request's resource and name."""
    qualified = f"{request.resource}.{request.group}" if request.group else request.resource
    name = request.name
    message = f'{qualified} "{name}" is forbidden: {cause}' if name else f"{qualified} is forbidden: {cause}"
    return AdmissionError(errors.forbidden(message, name, request.group, request.resource).status)


class _CallFailed(Exception):
    """A failed call (transport or invalid response): subject to the webhook's failurePolicy."""

    def __init__(self, webhook: Webhook, reason: str) -> None:
        super().__init__(f'failed calling webhook "{webhook.name}": {reason}')


def _invalid(webhook: Webhook, detail: str) -> _CallFailed:
    return _CallFailed(webhook, f"received invalid webhook response: {detail}")


class _Versions:
    """One request in the versions webhooks ask for, each converted at most once."""

    def __init__(self, admission: WebhookAdmission, request: AdmissionRequest) -> None:
        self._admission = admission
        self.request = request
        self._converted: dict[str, asyncio.Task[AdmissionRequest]] = {}

    async def get(self, version: str) -> AdmissionRequest:
        if version == self.request.version:
            return self.request
        task = self._converted.get(version)
        if task is None:
            task = asyncio.ensure_future(self._in_version(version))
            self._converted[version] = task
        return await task

    async def _in_version(self, version: str) -> AdmissionRequest:
        request = self.request
        new = await self.convert(request.object, version) if request.object is not None else None
        old = await self.convert(request.old_object, version) if request.old_object is not None else None
        return replace(request, version=version, object=new, old_object=old)

    async def convert(self, obj: Obj | None, version: str) -> Obj | None:
        if obj is None:
            return None
        crd = self._admission._crd(self.request)
        if crd is None:
            raise internal_error(
                f"no CustomResourceDefinition for {self.request.resource}.{self.request.group}"
            )
        try:
            [converted] = await convert_objects(
                crd, [obj], f"{self.request.group}/{version}", client=self._admission._client
            )
        except ConversionError as exc:
            raise AdmissionError(exc.status) from None
        return converted


class WebhookAdmission:
    """The webhook admission plugin of the local API server (an ``AdmissionPlugin``)."""

    def __init__(self, store: StoreView, service_resolver: ServiceResolver | None = None) -> None:
        self._store = store
        self._client = WebhookClient(service_resolver)
        # The webhooks of each kind of configuration, built once and kept until a configuration of
        # that kind changes: listing, sorting and rebuilding them on every request cost 15 % of the
        # server's CPU under load. A store that cannot report changes gets no cache.
        self._built: dict[str, list[Webhook]] = {}
        # Per shape of request (which configurations, operation, resource, scope), the webhooks
        # whose rules match it and the version each is called with: matching every rule of every
        # webhook on every write cost more than the calls of the one webhook that matched.
        self._matched: dict[tuple[object, ...], list[tuple[Webhook, str]]] = {}
        add_listener = getattr(store, "add_listener", None)
        self._caching = callable(add_listener)
        if callable(add_listener):
            add_listener(lambda event: self._forget(event.key))

    async def close(self) -> None:
        """Close the shared HTTPS session; call when the server stops."""
        await self._client.close()

    async def mutate(self, request: AdmissionRequest) -> AdmissionResult:
        if _is_exempt(request):
            return AdmissionResult(request.object)
        webhooks = self._matching(MUTATING, request)
        if not webhooks:
            return AdmissionResult(request.object)
        current = replace(request, object=copy_json(request.object))
        versions = _Versions(self, current)
        warnings: list[str] = []
        invoked_reinvocable: set[tuple[str, int]] = set()
        to_reinvoke: set[tuple[str, int]] = set()
        for reinvoking in (False, True):
            if reinvoking and not to_reinvoke:
                break
            for webhook, version in webhooks:
                # A webhook is never called for the first time in the reinvocation round.
                if reinvoking and webhook.key not in to_reinvoke:
                    continue
                invoked = await self._invocation(webhook, version, versions)
                if invoked is None:
                    continue
                try:
                    patched, hook_warnings = await self._call_mutating(webhook, invoked, current.version)
                except _CallFailed as exc:
                    if not webhook.fails_open:
                        raise internal_error(str(exc)) from None
                    logger.warning("ignoring failed mutating webhook (failurePolicy Ignore): %s", exc)
                    if webhook.reinvocable:  # it was invoked, so it may be reinvoked
                        invoked_reinvocable.add(webhook.key)
                    continue
                warnings.extend(hook_warnings)
                if patched != invoked.object:
                    if invoked.version != current.version:
                        patched = await versions.convert(patched, current.version)
                    current = replace(current, object=patched)
                    versions = _Versions(self, current)
                    to_reinvoke |= invoked_reinvocable
                if webhook.reinvocable:
                    invoked_reinvocable.add(webhook.key)
        return AdmissionResult(current.object, warnings)

    async def validate(self, request: AdmissionRequest) -> list[str]:
        if _is_exempt(request):
            return []
        webhooks = self._matching(VALIDATING, request)
        if not webhooks:
            return []
        versions = _Versions(self, request)
        outcomes: list[list[str] | BaseException | None]
        if len(webhooks) == 1:  # the usual case: no task to spawn for one call
            webhook, version = webhooks[0]
            try:
                outcomes = [await self._call_validating(webhook, version, versions)]
            except Exception as exc:
                outcomes = [exc]
        else:
            outcomes = await asyncio.gather(
                *(self._call_validating(webhook, version, versions) for webhook, version in webhooks),
                return_exceptions=True,
            )
        warnings: list[str] = []
        first_error: BaseException | None = None
        for (webhook, _), outcome in zip(webhooks, outcomes, strict=True):
            if outcome is None:
                continue
            if isinstance(outcome, _CallFailed):
                if webhook.fails_open:
                    logger.warning("ignoring failed validating webhook (failurePolicy Ignore): %s", outcome)
                    continue
                outcome = internal_error(str(outcome))
            if isinstance(outcome, BaseException):
                first_error = first_error or outcome
                continue
            warnings.extend(outcome)
        if first_error is not None:
            raise first_error
        return warnings

    # -- who is called -------------------------------------------------------------------

    def _forget(self, changed: tuple[str, str]) -> None:
        """Drop what was built from ``(group, plural)`` objects: the store calls this as each
        change is committed, so the very next request sees the change."""
        group, resource = changed
        if group == ADMISSION_GROUP:
            self._built.pop(resource, None)
            self._matched.clear()
        elif group == CRD_GROUP:
            self._matched.clear()  # the versions a custom resource is served in: matchPolicy Equivalent

    def _webhooks(self, resource: str) -> list[Webhook]:
        """Every webhook of every ``resource`` configuration, configurations in name order."""
        built = self._built.get(resource)
        if built is None:
            built = self._build(resource)
            if self._caching:
                self._built[resource] = built
        return built

    def _matching(self, resource: str, request: AdmissionRequest) -> list[tuple[Webhook, str]]:
        """The webhooks of ``resource`` configurations whose rules match ``request``, each with the
        version it is called with (selectors and matchConditions are judged per request)."""
        key = (
            resource,
            request.operation,
            request.group,
            request.version,
            request.resource,
            request.subresource,
            bool(request.namespace),
        )
        matched = self._matched.get(key) if self._caching else None
        if matched is None:
            matched = []
            for webhook in self._webhooks(resource):
                version = self._matching_version(webhook, request)
                if version is not None:
                    matched.append((webhook, version))
            if self._caching:
                self._matched[key] = matched
        return matched

    def _build(self, resource: str) -> list[Webhook]:
        configurations = sorted(
            self._store.list(ADMISSION_GROUP, resource),
            key=lambda configuration: str(configuration.get("metadata", {}).get("name", "")),
        )
        return [
            Webhook(str(configuration["metadata"]["name"]), index, spec)
            for configuration in configurations
            for index, spec in enumerate(configuration.get("webhooks") or [])
        ]

    async def _invocation(
        self, webhook: Webhook, version: str, versions: _Versions
    ) -> AdmissionRequest | None:
        """The request as ``webhook`` (whose rules matched, in ``version``) is to see it, or None
        when it is not called.

        Selectors, then matchConditions (over the object in the version the webhook is called
        with); raises when a condition fails closed or a conversion fails.
        """
        request = versions.request
        try:
            if not self._namespace_matches(webhook.spec.get("namespaceSelector"), request):
                return None
            if not _object_matches(webhook.spec.get("objectSelector"), request):
                return None
        except SelectorError as exc:
            raise internal_error(str(exc)) from None
        invoked = await versions.get(version)
        if not _conditions_match(webhook, invoked, request.version):
            return None
        return invoked

    def _matching_version(self, webhook: Webhook, request: AdmissionRequest) -> str | None:
        """The version whose resource the rules match: the request's own, else (matchPolicy
        Equivalent, the default) another served version of the same custom resource."""
        rules = webhook.spec.get("rules") or []
        if any(rule_matches(rule, request) for rule in rules):
            return request.version
        if webhook.spec.get("matchPolicy", "Equivalent") != "Equivalent":
            return None
        for version in self._equivalent_versions(request):
            candidate = replace(request, version=version)
            if any(rule_matches(rule, candidate) for rule in rules):
                return version
        return None

    def _crd(self, request: AdmissionRequest) -> Obj | None:
        if not request.group:
            return None
        return self._store.get(
            CRD_GROUP, "customresourcedefinitions", None, f"{request.resource}.{request.group}"
        )

    def _equivalent_versions(self, request: AdmissionRequest) -> list[str]:
        crd = self._crd(request)
        if crd is None:
            return []
        return [
            str(version["name"])
            for version in (crd.get("spec") or {}).get("versions") or []
            if version.get("served", True) and version.get("name") != request.version
        ]

    def _namespace_matches(self, selector: Obj | None, request: AdmissionRequest) -> bool:
        if not selector:
            return True
        if request.group == "" and request.resource == "namespaces":
            namespace_object = request.object if request.object is not None else request.old_object
            labels = _labels(namespace_object)
            labels.setdefault(NAME_LABEL, request.name)
            return label_selector_matches(selector, labels)
        if not request.namespace:
            return True  # cluster-scoped objects ignore namespaceSelector
        namespace = self._store.get("", "namespaces", None, request.namespace)
        labels = _labels(namespace)
        labels.setdefault(NAME_LABEL, request.namespace)
        return label_selector_matches(selector, labels)

    # -- calls ---------------------------------------------------------------------------

    async def _call_mutating(
        self, webhook: Webhook, request: AdmissionRequest, request_version: str
    ) -> tuple[Obj | None, list[str]]:
        response = await self._call(webhook, request, request_version)
        patch = response.get("patch")
        patch_type = response.get("patchType")
        if patch and not patch_type:
            raise _invalid(webhook, "webhook returned response.patch but not response.patchType")
        if patch_type and not patch:
            raise _invalid(webhook, "webhook returned response.patchType but not response.patch")
        warnings = _warnings(response)
        if not response.get("allowed"):
            raise denial(webhook.name, response.get("status"))
        if not patch:
            return request.object, warnings
        if patch_type != "JSONPatch":
            raise _CallFailed(webhook, f'unsupported patch type "{patch_type}"')
        return _apply_patch(request.object, patch), warnings

    async def _call_validating(self, webhook: Webhook, version: str, versions: _Versions) -> list[str] | None:
        """The webhook's warnings, or None when it is not called."""
        request = await self._invocation(webhook, version, versions)
        if request is None:
            return None
        response = await self._call(webhook, request, versions.request.version)
        if response.get("patch"):
            raise _invalid(webhook, "validating webhook may not return response.patch")
        if response.get("patchType"):
            raise _invalid(webhook, "validating webhook may not return response.patchType")
        if not response.get("allowed"):
            raise denial(webhook.name, response.get("status"))
        return _warnings(response)

    async def _call(self, webhook: Webhook, request: AdmissionRequest, request_version: str) -> Obj:
        """POST the AdmissionReview and return its verified ``response``."""
        if request.dry_run and webhook.spec.get("sideEffects") not in _SIDE_EFFECT_FREE_ON_DRY_RUN:
            message = f'admission webhook "{webhook.name}" does not support dry run'
            raise AdmissionError(errors.bad_request(message).status)
        versions = webhook.spec.get("admissionReviewVersions") or ["v1"]
        version = next((v for v in versions if v in ("v1", "v1beta1")), None)
        if version is None:
            raise _CallFailed(webhook, f"webhook does not accept known AdmissionReview versions: {versions}")
        api_version = f"admission.k8s.io/{version}"
        uid = str(uuid.uuid4())
        review = admission_review(request, uid, api_version, request_version=request_version)
        try:
            target = self._client.target(webhook.spec.get("clientConfig") or {}, webhook.timeout_seconds)
            answer = await self._client.post(target, review)
        except WebhookCallError as exc:
            raise _CallFailed(webhook, exc.reason) from None
        invalid = _verify_review(answer, uid, api_version)
        if invalid:
            raise _invalid(webhook, invalid)
        response: Obj = answer["response"]
        return response


def admission_review(
    request: AdmissionRequest,
    uid: str,
    api_version: str = "admission.k8s.io/v1",
    *,
    request_version: str | None = None,
) -> Obj:
    """The AdmissionReview the real API server POSTs for ``request``.

    ``request`` is in the version the webhook is called with; ``request_version`` is the one the
    client used, when it differs (``requestKind``/``requestResource``).
    """
    kind = {"group": request.group, "version": request.version, "kind": request.kind}
    resource = {"group": request.group, "version": request.version, "resource": request.resource}
    body: Obj = {"uid": uid, "kind": kind, "resource": resource}
    if request.subresource:
        body["subResource"] = request.subresource
    asked = request_version or request.version
    body["requestKind"] = dict(kind, version=asked)
    body["requestResource"] = dict(resource, version=asked)
    given = (("requestSubResource", request.subresource), ("name", request.name),
             ("namespace", request.namespace))
    body.update((key, value) for key, value in given if value)
    body["operation"] = request.operation
    body["userInfo"] = request.user
    body["object"] = request.object
    body["oldObject"] = request.old_object
    body["dryRun"] = request.dry_run
    options = dict(request.options or {})
    if request.operation in _OPTIONS_KIND:
        options.setdefault("kind", _OPTIONS_KIND[request.operation])
        options.setdefault("apiVersion", "meta.k8s.io/v1")
    body["options"] = options or None
    return {"kind": "AdmissionReview", "apiVersion": api_version, "request": body}


def _verify_review(answer: Obj, uid: str, api_version: str) -> str | None:
    """``VerifyAdmissionResponse``: why the answer is unusable, or None."""
    problem = review_problem(answer, "AdmissionReview", api_version, uid, "webhook response was absent")
    if problem is None and not isinstance(answer["response"].get("allowed", False), bool):
        problem = "response.allowed must be a bool"
    return problem


def _apply_patch(obj: Obj | None, patch: object) -> Obj | None:
    try:
        operations = json.loads(base64.b64decode(str(patch), validate=True))
        # One copy: the patch applies in place to it (in_place=False would copy once more).
        patched = jsonpatch.JsonPatch(operations).apply(copy_json(obj), in_place=True)
    except (binascii.Error, ValueError) as exc:
        raise internal_error(f"unable to decode the webhook's JSONPatch: {exc}") from None
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError) as exc:
        raise internal_error(f"unable to apply the webhook's JSONPatch: {exc}") from None
    if not isinstance(patched, dict):
        raise internal_error("the webhook's JSONPatch did not produce an object")
    return patched


def _warnings(response: Obj) -> list[str]:
    return [str(w) for w in response.get("warnings") or [] if str(w).strip()]


def _is_exempt(request: AdmissionRequest) -> bool:
    return request.group == ADMISSION_GROUP and request.resource in _EXEMPT_RESOURCES


# -- matching ------------------------------------------------------------------------------


def rule_matches(rule: Obj, request: AdmissionRequest) -> bool:
    """One ``RuleWithOperations``: operations, apiGroups, apiVersions, resources[/sub], scope."""

    def listed(values: Sequence[str] | None, value: str) -> bool:
        return bool(values) and ("*" in values or value in values)  # type: ignore[operator]

    if not listed(rule.get("operations"), request.operation):
        return False
    if not listed(rule.get("apiGroups"), request.group):
        return False
    if not listed(rule.get("apiVersions"), request.version):
        return False
    for entry in rule.get("resources") or []:
        resource, _, subresource = str(entry).partition("/")
        if resource in ("*", request.resource) and subresource in ("*", request.subresource):
            break
    else:
        return False
    scope = rule.get("scope", "*")
    is_namespace = request.group == "" and request.resource == "namespaces"
    if scope == "Namespaced":
        return not is_namespace and bool(request.namespace)
    if scope == "Cluster":
        return is_namespace or not request.namespace
    return True


def _labels(obj: Obj | None) -> dict[str, str]:
    if not obj:
        return {}
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _object_matches(selector: Obj | None, request: AdmissionRequest) -> bool:
    if not selector:
        return True
    return any(
        obj is not None and label_selector_matches(selector, _labels(obj))
        for obj in (request.object, request.old_object)
    )


def _conditions_match(webhook: Webhook, request: AdmissionRequest, request_version: str) -> bool:
    """All conditions true → call; any false → skip; otherwise errors fail per failurePolicy."""
    conditions = webhook.spec.get("matchConditions") or []
    if not conditions:
        return True
    variables = {
        "object": request.object,
        "oldObject": request.old_object,
        "request": admission_review(request, "", request_version=request_version)["request"],
    }
    errors: list[str] = []
    for condition in conditions:
        expression = str(condition.get("expression", ""))
        try:
            if not cel.evaluate_bool(expression, variables):
                return False
        except cel.CELError as exc:
            name = condition.get("name", "")
            errors.append(f"matchCondition '{name}': expression '{expression}' resulted in error: {exc}")
    if not errors:
        return True
    if webhook.fails_open:
        return False
    logger.warning("failed evaluating match conditions of %s, failing closed: %s", webhook.name, errors)
    raise forbidden(request, errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
