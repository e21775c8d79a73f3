"""Read-modify-write with optimistic concurrency: the write carries the resourceVersion that was read.

A 409 means someone else wrote first; the object is read again and the change recomputed from
the fresh copy, so no one's write is lost and no decision is applied to state it was not made on.
"""

from __future__ import annotations

from collections.abc import Callable

from kadmit.kube.client import Client
from kadmit.kube.errors import Conflict, NotFound
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


async def update_unless_gone(client: Client, resource: Resource, current: Obj, mutate: Callable[[Obj], bool],
                             *, attempts: int = MAX_ATTEMPTS) -> Obj | None:
    """:func:`update`, where an object deleted meanwhile (404) is nothing left to change: None."""
    try:
        return await _update(client, resource, current, mutate, None, attempts)
    except NotFound:
        return None


def replaced_by(compute: Callable[[Obj], Obj | None]) -> Callable[[Obj], bool]:
    """A ``mutate`` for :func:`update` from a pure function (dict in, new dict or None out, as the
    job integrations are written): the object becomes what ``compute`` returns; None or an equal
    object is no change, so nothing is written."""

    def mutate(obj: Obj) -> bool:
        new = compute(obj)
        if new is None or new == obj:
            return False
        obj.clear()
        obj.update(new)
        return True

    return mutate


def without_finalizer(finalizer: str) -> Callable[[Obj], bool]:
    """A ``mutate`` for :func:`update` that drops ``finalizer`` (no change when it is not there)."""

    def mutate(obj: Obj) -> bool:
        finalizers = obj["metadata"].get("finalizers") or []
        if finalizer not in finalizers:
            return False
        obj["metadata"]["finalizers"] = [f for f in finalizers if f != finalizer]
        return True

    return mutate


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
