"""Topology-aware scheduling annotations on a Job's pod template (Kueue's ``ValidateTASPodSetRequest``).

TopologyAwareScheduling is on by default in Kueue, so a Job with contradictory or malformed TAS
annotations is refused at creation rather than left to fail in the scheduler.
"""

from __future__ import annotations

import json
from typing import Any

from kadmit.webhook.fielderrors import OMIT, FieldError, Path, forbidden, invalid, required
from kadmit.webhook.names import qualified_name

REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_TOPOLOGY = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"

_GO_BOOLS = {"1", "t", "T", "true", "TRUE", "True", "0", "f", "F", "false", "FALSE", "False"}


def _int32(text: str) -> int | None:
    body = text[1:] if text[:1] in "+-" else text
    if not body.isascii() or not body.isdigit():
        return None
    value = int(text)
    return value if -(2**31) <= value < 2**31 else None


def validate_tas_annotations(
    annotations: dict[str, Any], path: Path, pod_count: int | None
) -> list[FieldError]:
    """``path`` is the template's ``metadata``; ``pod_count`` bounds the slice size when known."""
    errors: list[FieldError] = []
    apath = path.child("annotations")
    found = [
        key for key in (REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY, UNCONSTRAINED_TOPOLOGY) if key in annotations
    ]
    if len(found) > 1:
        names = ", ".join(
            json.dumps(k) for k in (REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY, UNCONSTRAINED_TOPOLOGY)
        )
        errors.append(invalid(apath, OMIT, f"must not contain more than one topology annotation: [{names}]"))
    for key in (REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY, SLICE_REQUIRED_TOPOLOGY):
        if key in annotations:
            value = str(annotations[key])
            errors += [invalid(apath.key(key), value, m) for m in qualified_name(value)]
    if UNCONSTRAINED_TOPOLOGY in annotations and str(annotations[UNCONSTRAINED_TOPOLOGY]) not in _GO_BOOLS:
        errors.append(
            invalid(
                apath.key(UNCONSTRAINED_TOPOLOGY),
                annotations[UNCONSTRAINED_TOPOLOGY],
                "must be a boolean value",
            )
        )
    if SLICE_SIZE in annotations:
        text = str(annotations[SLICE_SIZE])
        size = _int32(text)
        if size is None:
            errors.append(invalid(apath.key(SLICE_SIZE), text, "must be a numeric value"))
        elif size < 1:
            errors.append(invalid(apath.key(SLICE_SIZE), text, "must be greater than or equal to 1"))
        elif pod_count is not None and size > pod_count:
            errors.append(
                invalid(apath.key(SLICE_SIZE), text, f"must not be greater than pod set count {pod_count}")
            )
    if SLICE_REQUIRED_TOPOLOGY in annotations and SLICE_SIZE not in annotations:
        errors.append(
            required(apath.key(SLICE_SIZE), "slice size is required if slice topology is requested")
        )
    if SLICE_REQUIRED_TOPOLOGY not in annotations and SLICE_SIZE in annotations:
        errors.append(
            forbidden(apath.key(SLICE_SIZE), f"cannot be set when '{SLICE_REQUIRED_TOPOLOGY}' is not present")
        )
    return errors
