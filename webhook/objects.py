"""Reading the objects of an admission request, whose shape is not to be trusted.

A field that should be an object may be absent, null or something else; labels and annotations
may hold non-string values until the API server's validation (which runs after the mutating
webhooks) refuses them. Every handler reads them through these, the same way.
"""

from __future__ import annotations

from typing import Any

from kadmit.workload import Obj


def mapping(value: Any) -> dict[str, Any]:
    """A field that should be an object: itself, or ``{}`` when it is absent or not an object."""
    return value if isinstance(value, dict) else {}


def metadata_of(obj: Obj) -> dict[str, Any]:
    """``metadata``, or ``{}`` when it is absent or not an object."""
    return mapping(obj.get("metadata"))


def string_map(value: Any) -> dict[str, str]:
    """Labels or annotations (a copy), every value as a string."""
    return {str(k): v if isinstance(v, str) else str(v) for k, v in mapping(value).items()}


def labels_of(obj: Obj) -> dict[str, str]:
    return string_map(mapping(obj.get("metadata")).get("labels"))


def annotations_of(obj: Obj) -> dict[str, str]:
    return string_map(mapping(obj.get("metadata")).get("annotations"))
