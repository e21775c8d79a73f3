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

from kadmit.localcluster.errors import cause
from kadmit.localcluster.objects import Obj, copy_json, json_type

_META_FIELDS = ("apiVersion", "kind", "metadata")
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
        old_status = old.get("status") if old is not None else None
        if self._status_fields is not None and isinstance(status, dict) and isinstance(old_status, dict):
            try:
                for key, value in status.items():
                    if key in old_status and old_status[key] == value:
                        continue
                    schema = self._status_fields.get(key)
                    if schema is None:
                        continue  # pruned before validation; nothing declared to check it against
                    check = self._fast_fields.get(key)
                    if check is None:
                        check = self._fast_fields[key] = fastjsonschema.compile(
                            {"$schema": "http://json-schema.org/draft-04/schema#", **schema})
                    check(value)
                return []
            except fastjsonschema.JsonSchemaException:
                return self.causes(obj)
        try:
            self._fast_status({"status": obj["status"]} if "status" in obj else {})
            return []
        except fastjsonschema.JsonSchemaException:
            return self.causes(obj)


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

