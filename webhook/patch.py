"""The JSONPatch between the object a webhook received and the one it wants.

Handlers build the object they want and let this module say what changed.
``jsonpatch.make_patch`` gives the same result (tests prove it by applying both); this walk is
several times cheaper because it replaces a changed list wholesale instead of searching for the
smallest edit, which admission responses never need, and because it skips by identity every
subtree a copy-on-write handler left shared with the request.
"""

from __future__ import annotations

from typing import Any

Operation = dict[str, Any]


def escape(token: str) -> str:
    """RFC 6901: ``~`` → ``~0``, ``/`` → ``~1`` (label keys such as ``kueue.x-k8s.io/queue-name``)."""
    return token.replace("~", "~0").replace("/", "~1")


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``, which Python's ``==`` would say it is."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def diff(old: Any, new: Any, path: str = "") -> list[Operation]:
    """Operations that turn ``old`` into ``new`` (``[]`` when they are equal)."""
    ops: list[Operation] = []
    _diff(old, new, path, ops)
    return ops


def _diff(old: Any, new: Any, path: str, ops: list[Operation]) -> None:
    if old is new:  # shared with the request: unchanged (handlers copy what they change)
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": f"{path}/{escape(key)}", "value": value})
            elif old[key] is not value:  # the path is only built for what may have changed
                _diff(old[key], value, f"{path}/{escape(key)}", ops)
        return
    if not _equal(old, new):
        ops.append({"op": "replace", "path": path, "value": new})
