"""``metav1.Status`` errors with the reasons and codes a real API server uses.

Clients branch on ``reason`` and ``code`` (kubernetes-asyncio raises ``ApiException(status=code)``,
kubectl prints ``message``), so each constructor mirrors the apiserver's wording.
"""

from __future__ import annotations

from typing import Any

from kadmit.localcluster.objects import Obj


class ApiError(Exception):
    """A request that fails with a ``Status`` body."""

    def __init__(self, status: Obj) -> None:
        super().__init__(str(status.get("message", "")))
        self.status = status

    @property
    def code(self) -> int:
        return int(self.status.get("code", 500))


def status(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    """A failed ``metav1.Status``; an empty reason or details is left out, as JSON omits it upstream."""
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    body["message"] = message
    if reason:
        body["reason"] = reason
    if details:
        body["details"] = details
    body["code"] = code
    return body


def _details(name: str, group: str, kind: str) -> Obj:
    details: Obj = {"kind": kind}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def not_found(qualified: str, name: str, group: str = "", plural: str = "") -> ApiError:
    kind = plural or qualified.split(".", 1)[0]
    return ApiError(status(404, "NotFound", f'{qualified} "{name}" not found', _details(name, group, kind)))


def already_exists(qualified: str, name: str, group: str = "", plural: str = "") -> ApiError:
    kind = plural or qualified.split(".", 1)[0]
    return ApiError(
        status(409, "AlreadyExists", f'{qualified} "{name}" already exists', _details(name, group, kind))
    )


def conflict(qualified: str, name: str, why: str, group: str = "", plural: str = "") -> ApiError:
    kind = plural or qualified.split(".", 1)[0]
    return ApiError(
        status(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
            _details(name, group, kind),
        )
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, name: str, causes: list[Obj], group: str = "") -> ApiError:
    """422 with field causes; each cause is ``{"type", "field", "message"}`` as built by :func:`cause`."""
    texts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details = _details(name, group, kind)
    details["causes"] = [
        {"reason": c["reason"], "message": c["message"], "field": c.get("field", "")} for c in causes
    ]
    return ApiError(
        status(
            422,
            "Invalid",
            f'{kind}.{group} "{name}" is invalid: {summary}'
            if group
            else f'{kind} "{name}" is invalid: {summary}',
            details,
        )
    )


def cause(reason: str, field: str, message: str) -> Obj:
    """One field error. ``reason`` is e.g. FieldValueRequired, FieldValueInvalid, FieldValueForbidden."""
    return {"reason": reason, "field": field, "message": message}


def required(field: str, detail: str = "") -> Obj:
    return cause("FieldValueRequired", field, "Required value" + (f": {detail}" if detail else ""))


def invalid_value(field: str, value: Any, detail: str) -> Obj:
    import json

    return cause("FieldValueInvalid", field, f"Invalid value: {json.dumps(value)}: {detail}")


def unsupported_value(field: str, value: Any, allowed: list[str]) -> Obj:
    import json

    supported = ", ".join(json.dumps(a) for a in allowed)
    return cause(
        "FieldValueNotSupported",
        field,
        f"Unsupported value: {json.dumps(value)}: supported values: {supported}",
    )


def forbidden_field(field: str, detail: str) -> Obj:
    return cause("FieldValueForbidden", field, f"Forbidden: {detail}")


def bad_request(message: str) -> ApiError:
    return ApiError(status(400, "BadRequest", message))


def forbidden(message: str, name: str = "", group: str = "", plural: str = "") -> ApiError:
    return ApiError(status(403, "Forbidden", message, _details(name, group, plural) if plural else None))


def unauthorized() -> ApiError:
    return ApiError(status(401, "Unauthorized", "Unauthorized"))


def method_not_allowed(message: str) -> ApiError:
    return ApiError(status(405, "MethodNotAllowed", message))


def unsupported_media_type(message: str) -> ApiError:
    return ApiError(status(415, "UnsupportedMediaType", message))


def internal_error(cause: str) -> ApiError:
    """``apierrors.NewInternalError``: a 500 whose one cause is ``cause``."""
    message = f"Internal error occurred: {cause}"
    return ApiError(status(500, "InternalError", message, {"causes": [{"message": cause}]}))


def gone(message: str) -> ApiError:
    return ApiError(status(410, "Expired", message))


def path_not_found(path: str) -> ApiError:
    return ApiError(status(404, "NotFound", f"the server could not find the requested resource ({path})"))
