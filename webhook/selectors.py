"""``metav1.LabelSelector`` matching, for ``managedJobsNamespaceSelector``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class SelectorError(ValueError):
    """A selector that cannot be evaluated (unknown operator, wrong number of values)."""


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy ``selector``: ``None`` matches nothing, ``{}`` everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key = expr.get("key", "")
        operator = expr.get("operator")
        values = expr.get("values") or []
        if operator == "In":
            if not values:
                raise SelectorError(f"selector key {key}: operator In needs values")
            if key not in labels or labels[key] not in values:
                return False
        elif operator == "NotIn":
            if not values:
                raise SelectorError(f"selector key {key}: operator NotIn needs values")
            if key in labels and labels[key] in values:
                return False
        elif operator == "Exists":
            if values:
                raise SelectorError(f"selector key {key}: operator Exists takes no values")
            if key not in labels:
                return False
        elif operator == "DoesNotExist":
            if values:
                raise SelectorError(f"selector key {key}: operator DoesNotExist takes no values")
            if key in labels:
                return False
        else:
            raise SelectorError(f"selector key {key}: unknown operator {operator!r}")
    return True
