"""Read-modify-write with optimistic concurrency: the write carries the resourceVersion that was read.

A 409 means someone else wrote first; the object is read again and the change recomputed from
the fresh copy, so no one's write is lost and no decision is applied to state it was not made on.
"""

from __future__ import annotations

from collections.abc import Callable

from kadmit.kube.client import Client
from kadmit.kube.errors import Conflict
from kadmit.kube.objects import Obj, copy_object
from kadmit.kube.resources import Resource

MAX_ATTEMPTS = 5


async def update_status(client: Client, resource: Resource, current: Obj, mutate: Callable[[Obj], bool],
                        *, attempts: int = MAX_ATTEMPTS) -> Obj | None:
    """Change ``status`` through the status subresource; ``mutate`` edits a status dict in place and
    returns whether it changed anything. Returns the written object, or None if nothing changed."""

    def apply(obj: Obj) -> bool:
        status = obj.get("status")
        if not isinstance(status, dict):
            status = obj["status"] = {}
        return mutate(status)

    return await _update(client, resource, current, apply, "status", attempts)


async def update(client: Client, resource: Resource, current: Obj, mutate: Callable[[Obj], bool],
                 *, attempts: int = MAX_ATTEMPTS) -> Obj | None:
    """Change the object (metadata, spec) with a PUT; ``mutate`` edits the whole object in place."""
    return await _update(client, resource, current, mutate, None, attempts)


async def _update(client: Client, resource: Resource, current: Obj, mutate: Callable[[Obj], bool],
                  subresource: str | None, attempts: int) -> Obj | None:
    meta = current["metadata"]
    namespace, name = meta.get("namespace"), meta["name"]
    obj = current
    for attempt in range(attempts):
        new = copy_object(obj)
        if not mutate(new):
            return None
        try:
            return await client.replace(resource, new, subresource=subresource)
        except Conflict:
            if attempt == attempts - 1:
                raise
        obj = await client.get(resource, namespace, name)
    raise AssertionError("unreachable")
