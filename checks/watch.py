"""The read side the runner needs: a synced cache of one kind, with change notifications.

It is the subset of ``kadmit.controller.informer.Informer`` the runner uses, written as a Protocol so
that ``checks/`` does not import the controller (DESIGN.md): whoever wires the runner hands it
informers, already started, through a factory.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kadmit.checks.kinds import Kind

Obj = dict[str, Any]
WatchHandler = Callable[[str, Obj, Obj | None], Awaitable[None] | None]
"""Called with ``(event_type, new_object, old_object)``; event_type is ADDED, MODIFIED or DELETED."""

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


class Watch(Protocol):
    """A started list+watch cache of one kind; its dicts are read-only."""

    async def wait_synced(self) -> None: ...

    def list(self, namespace: str | None = None) -> list[Obj]: ...

    def get(self, namespace: str | None, name: str) -> Obj | None: ...

    def add_handler(self, fn: WatchHandler) -> None: ...


WatchFactory = Callable[[Kind], Awaitable[Watch]]
"""Returns a started watch of the kind (the same one for the same kind, if the caller shares them)."""
