"""Kubernetes Events on the workloads the checks decide, as Kueue's check controllers emit them.

``kubectl describe workload`` then tells a user when and why a check changed. Recording is best
effort: a failed write is logged and never fails the evaluation.
"""

from __future__ import annotations

import logging
import secrets
from datetime import UTC, datetime
from typing import Any

from kadmit.checks.api import Api, ApiError
from kadmit.checks.kinds import Kind

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
EVENTS = Kind("", "v1", "events", "Event")
COMPONENT = "kadmit-checks"
NORMAL = "Normal"
WARNING = "Warning"


async def record(api: Api, obj: Obj, reason: str, message: str, event_type: str = NORMAL) -> None:
    meta = obj.get("metadata") or {}
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta.get('name', 'object')}.{secrets.token_hex(8)}",
            "namespace": meta.get("namespace") or "default",
        },
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        },
        "reason": reason,
        "message": message[:1024],
        "type": event_type,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        await api.create(EVENTS, event)
    except (ApiError, OSError) as exc:
        logger.debug(
            "event %s for %s/%s not recorded: %s", reason, meta.get("namespace"), meta.get("name"), exc
        )


def check_updated_message(name: str, old: str, new: str, message: str) -> str:
    """Kueue's ``AdmissionCheckUpdated`` text."""
    text = f"Admission check {name} updated state from {old} to {new}"
    return f"{text} with message: {message}" if message else text
