"""The one error hierarchy of kadmit's Kubernetes I/O.

Every failure of a call through :class:`kadmit.kube.Client` is an :class:`ApiError`: an answer
of the API server outside 2xx (with its ``metav1.Status`` reason and message when it sent one,
as a subclass per status code), or :class:`ApiUnreachable` when no answer came at all (refused
connection, reset, TLS failure, or the call's deadline). Callers catch one class and ask it
what happened (``exc.not_found``, ``exc.conflict``, ``exc.retryable``, ...) or catch the
subclass they expect, as kopf's ``APIError`` family is used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kadmit.kube.objects import Obj


class _StatusIs:
    """A yes/no attribute of an :class:`ApiError`: is its status one of ``codes``?"""

    def __init__(self, *codes: int) -> None:
        self.codes = codes

    def __get__(self, error: ApiError, owner: type[ApiError] | None = None) -> bool:
        return error.status in self.codes


class ApiError(Exception):
    """A call that did not succeed; ``status`` is the HTTP code (0 when nothing answered)."""

    def __init__(self, status: int, reason: str, message: str, body: Obj | None = None,
                 *, retry_after: float | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        self.retry_after = retry_after  # seconds, from a Retry-After header or the Status details

    # Questions about the status code, as read-only attributes.
    not_found = _StatusIs(404)
    conflict = _StatusIs(409)
    """409: a stale resourceVersion, or an object that already exists (see ``already_exists``)."""
    gone = _StatusIs(410)
    """410: the resourceVersion a watch or list asked for is too old; list again."""
    forbidden = _StatusIs(403)
    retryable = _StatusIs(0, 429, 500, 502, 503, 504)
    """Worth trying again unchanged, after a pause: overload, server trouble, no answer."""

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"


class BadRequest(ApiError):
    """400."""


class Unauthorized(ApiError):
    """401: the credentials are missing, wrong or expired."""


class Forbidden(ApiError):
    """403: RBAC, or an admission webhook that denied the request."""


class NotFound(ApiError):
    """404."""


class Conflict(ApiError):
    """409: the object changed since it was read (or, as :class:`AlreadyExists`, it exists)."""


class AlreadyExists(Conflict):
    """409 with reason ``AlreadyExists``: a create of a name that is taken."""


class Gone(ApiError):
    """410: the requested resourceVersion is no longer available."""


class Invalid(ApiError):
    """422: the object failed validation."""


class TooManyRequests(ApiError):
    """429: throttled by API priority and fairness; honour ``retry_after``."""


class ServerError(ApiError):
    """5xx."""


class ApiUnreachable(ApiError):
    """No answer: the connection failed or the call ran past its deadline (``status`` 0)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "Unreachable", message)


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone,
    422: Invalid, 429: TooManyRequests,
}


def error_from_response(status: int, text: str, headers: Mapping[str, str] | None = None) -> ApiError:
    """The error for a non-2xx answer: its ``metav1.Status`` reason and message when the body is one."""
    try:
        body = json.loads(text) if text else None
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        reason, message = str(body.get("reason") or ""), str(body.get("message") or "")
    else:
        body, reason, message = None, "", text.strip()[:500]
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    if cls is Conflict and reason == "AlreadyExists":
        cls = AlreadyExists
    return cls(status, reason, message, body, retry_after=_retry_after(headers, body))


def error_from_status(status: Obj) -> ApiError:
    """The error a watch stream's ``ERROR`` event carries (a ``metav1.Status`` object)."""
    code = status.get("code")
    text = json.dumps({"kind": "Status", **status})
    return error_from_response(int(code) if isinstance(code, int) and code > 0 else 500, text)


def _retry_after(headers: Mapping[str, str] | None, body: Obj | None) -> float | None:
    value: Any = (headers or {}).get("Retry-After")
    if value is None and body is not None:
        value = (body.get("details") or {}).get("retryAfterSeconds")
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None
