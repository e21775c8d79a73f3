"""The three PATCH flavours: JSON patch (RFC 6902), JSON merge patch (RFC 7386), strategic merge.

JSON patch goes through ``jsonpatch``. Merge patch is a few lines. Strategic merge patch has no
maintained Python implementation, so it is written here from the ``patchStrategy`` /
``patchMergeKey`` tags of the built-in Go types (k8s.io/api) and the ``$patch``,
``$deleteFromPrimitiveList``, ``$setElementOrder`` and ``$retainKeys`` directives.
"""

from __future__ import annotations

from typing import Any

import jsonpatch

from kadmit.localcluster.errors import ApiError, bad_request, status, unsupported_media_type
from kadmit.localcluster.objects import Obj, copy_json

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# patchMergeKey of list fields tagged patchStrategy "merge" in k8s.io/api. Lists not named here
# are atomic (replaced whole), as tolerations, args, command, readinessGates are upstream.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "ports": "containerPort",  # container ports; Service ports merge on "port" (see _merge_key)
    "webhooks": "name",
}
# Lists of scalars tagged patchStrategy "merge": merged as sets.
MERGED_SCALAR_LISTS = frozenset({"finalizers"})


def apply_patch(content_type: str, original: Obj, patch_body: bytes, strategic: bool) -> Obj:
    """The patched object; ``strategic`` says whether the kind is built-in (SMP allowed)."""
    import json

    media = content_type.split(";", 1)[0].strip().lower()
    if media == APPLY_PATCH:
        raise unsupported_media_type(
            "server-side apply is not supported by this local API server; use client-side apply"
        )
    try:
        patch = json.loads(patch_body or b"null")
    except ValueError as exc:
        raise bad_request(f"the patch body is not valid JSON: {exc}") from None
    if media == JSON_PATCH:
        if not isinstance(patch, list):
            raise bad_request(
                "a JSON patch (application/json-patch+json) must be a list of operations; to send a merge "
                "patch set Content-Type application/merge-patch+json (kubernetes-asyncio: _content_type=...)"
            )
        try:
            result = jsonpatch.JsonPatch(patch).apply(original)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError) as exc:
            message = f"the server rejected our request due to an error in our request: {exc}"
            raise ApiError(status(422, "Invalid", message)) from None
        if not isinstance(result, dict):
            raise bad_request("the JSON patch does not produce an object")
        return result
    if not isinstance(patch, dict):
        raise bad_request("a merge patch must be a JSON object")
    if media == MERGE_PATCH:
        merged: Obj = merge_patch(original, patch)
        return merged
    if media == STRATEGIC_PATCH:
        if not strategic:
            raise unsupported_media_type(
                "strategic merge patch is not supported for custom resources; use --type=merge"
            )
        return strategic_merge(original, patch)
    raise unsupported_media_type(
        f"the body of the request was in an unknown format - accepted media types include: {JSON_PATCH}, "
        f"{MERGE_PATCH}, {STRATEGIC_PATCH}"
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy_json(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _merge_key(field: str, items: list[Any]) -> str | None:
    key = MERGE_KEYS.get(field)
    if field == "ports" and any(
        isinstance(i, dict) and "containerPort" not in i and "port" in i for i in items
    ):
        return "port"
    return key


def strategic_merge(original: Obj, patch: Obj) -> Obj:
    """Apply a strategic merge patch to a built-in object."""
    result = _merge_map(original, patch)
    if not isinstance(result, dict):
        raise bad_request("a strategic merge patch cannot delete the whole object")
    return result


def _merge_map(original: Any, patch: Obj) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy_json(v) for k, v in patch.items() if k != "$patch"}
    if directive is not None:
        raise bad_request(f"unknown patch directive $patch: {directive!r}")
    result: Obj = dict(original) if isinstance(original, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$retainKeys",) or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _merge_map(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = value
    for key, order in patch.items():
        if key.startswith("$setElementOrder/") and isinstance(order, list):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = _ordered(field, result[field], order)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _ordered(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    """``$setElementOrder``: the listed elements in the given order, then the server-only ones."""
    key = _merge_key(field, items)

    def ident(item: Any) -> Any:
        return item.get(key) if key is not None and isinstance(item, dict) else item

    wanted = [ident(o) for o in order]
    rank = {_json_key(w): i for i, w in enumerate(wanted)}
    listed = sorted(
        (i for i in items if _json_key(ident(i)) in rank), key=lambda i: rank[_json_key(ident(i))]
    )
    return listed + [i for i in items if _json_key(ident(i)) not in rank]


def _json_key(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True)


def _merge_list(field: str, original: Any, patch: list[Any]) -> list[Any]:
    current = list(original) if isinstance(original, list) else []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy_json(p) for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    if field in MERGED_SCALAR_LISTS:
        merged = list(current)
        for item in patch:
            if item not in merged:
                merged.append(item)
        return merged
    key = _merge_key(field, current + patch)
    if key is None or not all(isinstance(p, dict) for p in patch):
        return [copy_json(p) for p in patch]
    for item in patch:
        if key not in item:
            raise bad_request(f"map in list {field} does not contain the merge key {key!r}")
        index = next(
            (i for i, c in enumerate(current) if isinstance(c, dict) and c.get(key) == item[key]), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                current.pop(index)
            continue
        if index is None:
            current.append(_merge_map({}, item))
        else:
            current[index] = _merge_map(current[index], item)
    return current
