"""A CRD's structural openAPIV3Schema: pruning, defaulting and validation, in the server's order.

Pruning drops fields the schema does not declare (reporting them, for ``fieldValidation``),
defaulting fills ``default`` values of absent fields, validation runs the schema through
``jsonschema`` (OpenAPI 3.0 schemas are Draft 4 plus ``nullable`` and the ``x-kubernetes-*``
extensions, which are translated first).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import fastjsonschema
import jsonschema
import orjson

from kadmit.localcluster.errors import cause
from kadmit.localcluster.objects import Obj, copy_json, json_type

_META_FIELDS = ("apiVersion", "kind", "metadata")
PASSED_VALUES = 4096
"""Status field values remembered per field as having passed their schema (most recent kept)."""
# How kube-openapi words a failed keyword, with the schema's value in the braces.
_DETAILS = {
    "maxLength": "may not be more than {} bytes",
    "minLength": "should be at least {} chars long",
    "maxItems": "must have at most {} items",
    "minItems": "should have at least {} items",
    "minimum": "should be greater than or equal to {}",
    "maximum": "should be less than or equal to {}",
    "pattern": "should match '{}'",
}


def prune(obj: Obj, schema: Obj) -> list[str]:
    """Remove undeclared fields from ``obj`` in place; return their paths (``spec.foo``)."""
    unknown: list[str] = []
    _prune(obj, schema, "", unknown, root=True)
    return unknown


def _prune(value: Any, schema: Obj, path: str, unknown: list[str], root: bool = False) -> None:
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
            return
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        keep_meta = root or schema.get("x-kubernetes-embedded-resource")
        for key in list(value):
            child_path = f"{path}.{key}" if path else key
            if keep_meta and key in _META_FIELDS:
                continue
            if properties is not None and key in properties:
                _prune(value[key], properties[key], child_path, unknown)
            elif isinstance(additional, dict):
                _prune(value[key], additional, child_path, unknown)
            elif additional is True or schema.get("x-kubernetes-preserve-unknown-fields"):
                continue
            elif properties is None and additional is None and not root:
                # A schema without properties (e.g. only a type) does not declare children.
                unknown.append(child_path)
                del value[key]
            else:
                unknown.append(child_path)
                del value[key]
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _prune(item, items, f"{path}[{i}]", unknown)


def apply_defaults(value: Any, schema: Obj) -> None:
    """Set ``default`` for absent properties, recursively, in place."""
    if isinstance(value, dict):
        for key, prop in (schema.get("properties") or {}).items():
            if key not in value and "default" in prop:
                value[key] = copy_json(prop["default"])
            if key in value:
                apply_defaults(value[key], prop)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for item in value.values():
                apply_defaults(item, additional)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in value:
                apply_defaults(item, items)


def to_json_schema(schema: Any) -> Any:
    """Translate the OpenAPI dialect to plain JSON Schema (Draft 4)."""
    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: Obj = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key in (
            "nullable",
            "default",
            "example",
            "externalDocs",
            "description",
            "format",
        ):
            continue
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {k: to_json_schema(v) for k, v in value.items()}
        else:
            out[key] = to_json_schema(value)
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        if "anyOf" in schema:
            out["allOf"] = [{"anyOf": to_json_schema(schema["anyOf"])}]
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


class SchemaValidator:
    """Validates objects of one CRD version; built once per schema."""

    def __init__(self, schema: Obj) -> None:
        root = dict(schema)
        properties = dict(root.get("properties") or {})
        properties.pop("metadata", None)  # ObjectMeta is validated by the server itself
        root["properties"] = properties
        translated = to_json_schema(root)
        translated["$schema"] = "http://json-schema.org/draft-04/schema#"
        self._validator = jsonschema.Draft4Validator(translated)
        self._fast: Callable[[Any], Any] = fastjsonschema.compile(translated)
        status = (translated.get("properties") or {}).get("status")
        self._fast_status: Callable[[Any], Any] | None = (
            fastjsonschema.compile({"$schema": translated["$schema"], "type": "object",
                                    "properties": {"status": status}})
            if isinstance(status, dict) else None
        )
        # A status schema that constrains nothing but its fields' own values (Kueue's do) is
        # checked field by field, each field's validator compiled when it is first needed.
        self._status_fields: Obj | None = (
            status["properties"]
            if isinstance(status, dict) and status.keys() <= {"type", "properties"}
            and status.get("type") == "object" and isinstance(status.get("properties"), dict)
            else None
        )
        self._fast_fields: dict[str, Callable[[Any], Any]] = {}
        # A list-map field (conditions, admission checks) is ratcheted item by item, by its keys.
        declared = ((root.get("properties") or {}).get("status") or {}).get("properties") or {}
        self._list_map_keys: dict[str, tuple[str, ...]] = {
            key: tuple(field["x-kubernetes-list-map-keys"])
            for key, field in declared.items()
            if isinstance(field, dict) and field.get("x-kubernetes-list-type") == "map"
            and field.get("x-kubernetes-list-map-keys") and isinstance(field.get("items"), dict)
        }
        self._passed: dict[str, dict[bytes, None]] = {}

    def causes(self, obj: Obj) -> list[Obj]:
        """Field causes; the compiled validator answers the common (valid) case fast."""
        try:
            self._fast(obj)
            return []
        except fastjsonschema.JsonSchemaException:
            pass
        found = []
        for error in sorted(self._validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
            found.append(_cause(error))
        return found

    def status_causes(self, obj: Obj, old: Obj | None = None) -> list[Obj]:
        """:meth:`causes` for an object whose only change is its status (a write of the status
        subresource): the rest was valid when stored, so the status alone is checked, as the
        real server's validation ratcheting lets unchanged fields be; any error is reported
        by the whole object's validation, in the same words.

        With the stored object ``old``, a status field equal to its stored value is not checked
        again either (ratcheting, one level down): only the fields the write changes are."""
        if self._fast_status is None:
            return self.causes(obj)
        status = obj.get("status")
        # A stored object without a status had every field unset: the first status write's fields
        # are all changes, each checked on its own (and remembered) as any later change is.
        old_status = old.get("status", {}) if old is not None else None
        if self._status_fields is not None and isinstance(status, dict) and isinstance(old_status, dict):
            try:
                for key, value in status.items():
                    before = old_status.get(key)
                    if before == value and key in old_status:
                        continue
                    schema = self._status_fields.get(key)
                    if schema is None:
                        continue  # pruned before validation; nothing declared to check it against
                    keys = self._list_map_keys.get(key)
                    if keys is not None and isinstance(value, list):
                        stored_items = before if isinstance(before, list) else []
                        self._check_list_map(key, schema, keys, value, stored_items)
                    else:
                        self._check_field(key, schema, value)
                return []
            except fastjsonschema.JsonSchemaException:
                return self.causes(obj)
        try:
            self._fast_status({"status": obj["status"]} if "status" in obj else {})
            return []
        except fastjsonschema.JsonSchemaException:
            return self.causes(obj)

    def _compiled(self, name: str, schema: Obj) -> Callable[[Any], Any]:
        check = self._fast_fields.get(name)
        if check is None:
            check = self._fast_fields[name] = fastjsonschema.compile(
                {"$schema": "http://json-schema.org/draft-04/schema#", **schema})
        return check

    def _check_field(self, key: str, schema: Obj, value: Any) -> None:
        """One status field's new value against its schema; a value that passed before passes
        again without the walk (validation is a function of the value alone: Workloads admitted to
        one ClusterQueue's flavors carry equal ``admission`` values)."""
        try:
            encoded = orjson.dumps(value)
        except orjson.JSONEncodeError:  # an integer past 64 bits: checked, not remembered
            self._compiled(key, schema)(value)
            return
        passed = self._passed.setdefault(key, {})
        if encoded in passed:
            return
        self._compiled(key, schema)(value)
        if len(passed) >= PASSED_VALUES:
            del passed[next(iter(passed))]
        passed[encoded] = None

    def _check_list_map(self, key: str, schema: Obj, keys: tuple[str, ...], value: list[Any],
                        before: list[Any]) -> None:
        """A list-map field item by item, as the real server ratchets it: an item equal to the
        stored item with the same keys is not checked again; the list's own bounds always are."""
        self._compiled(f"{key}[]", {k: v for k, v in schema.items() if k != "items"})(value)
        stored = {
            tuple(item.get(k) for k in keys): item for item in before if isinstance(item, dict)
        }
        check_item = self._compiled(f"{key}[*]", schema["items"])
        for item in value:
            if isinstance(item, dict) and stored.get(tuple(item.get(k) for k in keys)) == item:
                continue
            check_item(item)


def _field(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _cause(error: jsonschema.ValidationError) -> Obj:
    field = _field(error.absolute_path)
    value = error.instance
    rule: Any = error.validator_value
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        return cause("FieldValueRequired", f"{field}.{missing}" if field else missing, "Required value")
    if error.validator == "enum":
        allowed = ", ".join(json.dumps(v) for v in rule)
        return cause(
            "FieldValueNotSupported",
            field,
            f"Unsupported value: {json.dumps(value)}: supported values: {allowed}",
        )
    if error.validator == "type":
        expected = rule
        expected = expected if isinstance(expected, str) else " or ".join(expected)
        return cause(
            "FieldValueTypeInvalid",
            field,
            f"Invalid value: {json.dumps(json_type(value))}: {field} in body must be of type {expected}: "
            f"{json.dumps(json_type(value))}",
        )
    if error.validator == "anyOf" and all("type" in s for s in rule if isinstance(s, dict)):
        return cause(
            "FieldValueTypeInvalid",
            field,
            f"Invalid value: {json.dumps(value)}: {field} in body must be of type integer or string",
        )
    template = _DETAILS.get(str(error.validator))
    text = template.format(rule) if template is not None else error.message
    return cause("FieldValueInvalid", field, f"Invalid value: {json.dumps(value, default=str)}: {text}")

