"""Kubernetes Events about the objects kadmit acts on (``kubectl describe`` shows them)."""

from __future__ import annotations

import asyncio
import logging
import secrets
from datetime import UTC, datetime
from typing import Any

from kadmit.controller.kube import EVENTS, ApiError, Kube

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
COMPONENT = "kadmit-controller-manager"


class EventRecorder:
    """Writes core/v1 Events; a failed write is logged and never fails the caller."""

    def __init__(self, kube: Kube, component: str = COMPONENT, concurrency: int = 4) -> None:
        self.kube = kube
        self.component = component
        self._limit = asyncio.Semaphore(concurrency)
        self._pending: set[asyncio.Task[None]] = set()

    def emit(self, obj: Obj, kind: str, reason: str, message: str) -> None:
        """Record in the background: a loop never waits for its events to be written."""
        task = asyncio.create_task(self._bounded(obj, kind, reason, message))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _bounded(self, obj: Obj, kind: str, reason: str, message: str) -> None:
        async with self._limit:
            await self.record(obj, kind, reason, message)

    async def drain(self) -> None:
        """Wait for the events still being written (on shutdown)."""
        if self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def record(self, obj: Obj, kind: str, reason: str, message: str) -> None:
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name', 'object')}.{secrets.token_hex(8)}",
                         "namespace": namespace},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                               "name": meta.get("name"), "namespace": meta.get("namespace"),
                               "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.kube.create(EVENTS, event)
        except (ApiError, OSError) as exc:
            logger.debug("event %s for %s/%s not recorded: %s", reason, namespace, meta.get("name"), exc)
