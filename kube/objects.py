"""The API's objects as kadmit handles them: its JSON, as plain dicts (see :mod:`kadmit.kube.client`)."""

import copy
from typing import Any

import orjson

Obj = dict[str, Any]


def copy_object(obj: Obj) -> Obj:
    """A deep copy of an object as the API serves it: through orjson, about 7x faster than
    :func:`copy.deepcopy` on a Workload (writes copy the cached object before each change).
    What orjson refuses (integers beyond 64 bits, values that are not JSON) is deep-copied."""
    try:
        copied: Obj = orjson.loads(orjson.dumps(obj))
    except TypeError:
        return copy.deepcopy(obj)
    return copied
