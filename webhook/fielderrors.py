"""Field errors worded as Kubernetes words them (``k8s.io/apimachinery/pkg/util/validation/field``).

Kueue's webhooks return ``field.ErrorList.ToAggregate()``; users and scripts match on that text
(``spec.queueName: Invalid value: "x": ...``), so kadmit renders its denials the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


class Path:
    """A field path such as ``spec.resourceGroups[0].flavors[1]`` or ``metadata.labels[key]``."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def child(self, name: str, *more: str) -> Path:
        text = self._text
        for part in (name, *more):
            text = f"{text}.{part}" if text else part
        return Path(text)

    def index(self, i: int) -> Path:
        return Path(f"{self._text}[{i}]")

    def key(self, k: str) -> Path:
        return Path(f"{self._text}[{k}]")

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Path({self._text!r})"


ROOT = Path("")


class Quantity(str):
    """A value printed bare (as Go's ``fmt.Stringer``), e.g. a resource quantity ``10Gi``."""


class _Omit:
    """``field.OmitValueType{}``: the error names no value (``Invalid value: <detail>``)."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT = _Omit()


def _render_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Quantity):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class FieldError:
    """One error about one field; ``str()`` gives the apimachinery wording."""

    type: str
    field: Path
    value: Any = None
    detail: str = ""

    def __str__(self) -> str:
        if self.type in (REQUIRED, FORBIDDEN, INTERNAL, TOO_LONG) or self.value is OMIT:
            body = self.type
        else:
            body = f"{self.type}: {_render_value(self.value)}"
        if self.detail:
            body += f": {self.detail}"
        return f"{self.field}: {body}" if str(self.field) else body


INVALID = "Invalid value"
REQUIRED = "Required value"
DUPLICATE = "Duplicate value"
FORBIDDEN = "Forbidden"
NOT_SUPPORTED = "Unsupported value"
TOO_MANY = "Too many"
TOO_LONG = "Too long"
INTERNAL = "Internal error"
NOT_FOUND = "Not found"


def invalid(path: Path, value: Any, detail: str) -> FieldError:
    return FieldError(INVALID, path, value, detail)


def required(path: Path, detail: str = "") -> FieldError:
    return FieldError(REQUIRED, path, None, detail)


def duplicate(path: Path, value: Any) -> FieldError:
    return FieldError(DUPLICATE, path, value)


def forbidden(path: Path, detail: str) -> FieldError:
    return FieldError(FORBIDDEN, path, None, detail)


def not_supported(path: Path, value: Any, allowed: list[str]) -> FieldError:
    return FieldError(
        NOT_SUPPORTED, path, value, "supported values: " + ", ".join(json.dumps(a) for a in allowed)
    )


def too_many(path: Path, actual: int, limit: int) -> FieldError:
    return FieldError(TOO_MANY, path, actual, f"must have at most {limit} items")


def aggregate(errors: list[FieldError]) -> str:
    """``ErrorList.ToAggregate().Error()``: one error bare, several in brackets, duplicates dropped."""
    seen: list[str] = []
    for error in errors:
        text = str(error)
        if text not in seen:
            seen.append(text)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"
