"""CRD validation rules (``x-kubernetes-validations``): CEL over ``self`` and ``oldSelf``.

Rules are evaluated where they sit in the schema, with ``self`` the value there. Transition
rules (those that use ``oldSelf``) run only on updates, where the old value can be correlated
(object properties, map values, and items of ``x-kubernetes-list-type: map`` lists). As with the
real server's validation ratcheting, a value that an update leaves unchanged is not re-validated.

cel-python interprets CEL slowly (milliseconds per rule), so the server evaluates rules only when
asked to (``LocalCluster(crd_validation_rules=True)``).
"""

from __future__ import annotations

import json
from typing import Any

from kadmit.localcluster.cel import CELError, evaluate_bool
from kadmit.localcluster.errors import cause
from kadmit.localcluster.objects import Obj

_MISSING = object()


def rule_causes(schema: Obj, obj: Obj, old: Obj | None) -> list[Obj]:
    """Field causes for every rule ``obj`` breaks (``old`` is the stored object on update)."""
    causes: list[Obj] = []
    _walk(schema, obj, old if old is not None else _MISSING, "", causes)
    return causes


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string"


def _walk(schema: Obj, value: Any, old: Any, path: str, causes: list[Obj]) -> None:
    if old is not _MISSING and old == value:
        return  # ratcheting: unchanged values keep whatever they were
    for rule in schema.get("x-kubernetes-validations") or []:
        expression = rule.get("rule", "")
        transition = "oldSelf" in expression
        if transition and old is _MISSING:
            continue
        variables = {"self": value, "oldSelf": old} if transition else {"self": value}
        try:
            ok = evaluate_bool(expression, variables)
            message = rule.get("message") or f"failed rule: {expression}"
        except CELError as exc:
            ok, message = False, f"rule evaluation error: {exc}: {expression}"
        if not ok:
            field = path + (rule.get("fieldPath") or "")
            field = field.lstrip(".")
            reason = rule.get("reason") or "FieldValueInvalid"
            causes.append(cause(reason, field, f"Invalid value: {json.dumps(_type_name(value))}: {message}"))
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            child_schema = properties.get(key) if properties else None
            if child_schema is None and isinstance(additional, dict):
                child_schema = additional
            if child_schema is None:
                continue
            child_old = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
            _walk(child_schema, child, child_old, f"{path}.{key}", causes)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = schema["items"]
        keys = (
            schema.get("x-kubernetes-list-map-keys")
            if schema.get("x-kubernetes-list-type") == "map"
            else None
        )
        old_items: dict[tuple[Any, ...], Any] = {}
        if keys and isinstance(old, list):
            for item in old:
                if isinstance(item, dict):
                    old_items[tuple(item.get(k) for k in keys)] = item
        for index, item in enumerate(value):
            item_old: Any = _MISSING
            if keys and isinstance(item, dict):
                item_old = old_items.get(tuple(item.get(k) for k in keys), _MISSING)
            _walk(items, item, item_old, f"{path}[{index}]", causes)
