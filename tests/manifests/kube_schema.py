"""What the API server does with a CRD schema, reproduced for the tests of manifests/.

* :func:`structural_errors`: the rules that make a schema *structural* (apiextensions v1 refuses
  a CRD otherwise), plus the keywords CRDs forbid.
* :class:`ObjectValidator`: validation of an object against one version's schema, as
  ``kubectl apply`` (strict field validation) would see it: jsonschema after turning the
  OpenAPI-only keywords into JSON Schema, then defaulting, then the CEL rules (cel-python),
  each failure reported with its field path.
"""

from __future__ import annotations

import copy
import datetime
import functools
import re
from collections.abc import Iterator
from typing import Any

import celpy
import jsonschema
from celpy.adapter import json_to_cel
from jsonschema import validators

Schema = dict[str, Any]

#: Keywords a CRD schema may use (apiextensions.k8s.io/v1 JSONSchemaProps), besides x-kubernetes-*.
ALLOWED_KEYWORDS = {
    "type", "format", "description", "title", "properties", "additionalProperties", "items",
    "required", "enum", "default", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "pattern", "minItems", "maxItems", "minProperties", "maxProperties",
    "multipleOf", "nullable", "anyOf", "allOf", "oneOf", "not", "example", "externalDocs",
    "uniqueItems",
}  # fmt: skip
KUBERNETES_EXTENSIONS = {
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
    "x-kubernetes-validations",
}  # fmt: skip
#: Inside anyOf/allOf/oneOf/not only value validations may appear (structural rule 3).
NOT_IN_JUNCTORS = {"type", "description", "default", "additionalProperties", "nullable", "title"}
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_CEL = celpy.Environment()


@functools.cache
def cel_program(rule: str) -> Any:
    """The compiled ``rule`` (compiled once: the same rules recur across kinds and versions)."""
    return _CEL.program(_CEL.compile(rule))


def children(schema: Schema, path: str) -> Iterator[tuple[str, Schema]]:
    """The sub-schemas of a node that describe values (not the junctors), with their paths."""
    for name, sub in schema.get("properties", {}).items():
        yield f"{path}.{name}", sub
    if isinstance(schema.get("additionalProperties"), dict):
        yield f"{path}[*]", schema["additionalProperties"]
    if isinstance(schema.get("items"), dict):
        yield f"{path}[]", schema["items"]


def walk(schema: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    yield path, schema
    for sub_path, sub in children(schema, path):
        yield from walk(sub, sub_path)


def _junctor_errors(schema: Schema, path: str) -> list[str]:
    errors = []
    for junctor in ("anyOf", "allOf", "oneOf"):
        for i, sub in enumerate(schema.get(junctor, [])):
            if (
                junctor == "anyOf"
                and schema.get("x-kubernetes-int-or-string")
                and schema[junctor] == INT_OR_STRING
            ):
                continue
            bad = NOT_IN_JUNCTORS & set(sub)
            if bad:
                errors.append(f"{path}: {junctor}[{i}] may only hold value validations, not {sorted(bad)}")
    if "not" in schema and NOT_IN_JUNCTORS & set(schema["not"]):
        errors.append(f"{path}: not may only hold value validations")
    return errors


def _list_errors(schema: Schema, path: str) -> list[str]:
    list_type = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys")
    if list_type is None:
        return [f"{path}: x-kubernetes-list-map-keys without list-type map"] if keys else []
    if schema.get("type") != "array":
        return [f"{path}: x-kubernetes-list-type on a {schema.get('type')}"]
    items = schema.get("items", {})
    if list_type == "map":
        if items.get("type") != "object" or not keys:
            return [f"{path}: a map list needs object items and x-kubernetes-list-map-keys"]
        return [
            f"{path}: list map key {key!r} must be a required or defaulted scalar"
            for key in keys
            if key not in items.get("properties", {})
            or items["properties"][key].get("type") in ("object", "array")
            or (key not in items.get("required", []) and "default" not in items["properties"][key])
        ]
    if keys:
        return [f"{path}: x-kubernetes-list-map-keys without list-type map"]
    if (
        list_type == "set"
        and items.get("type") in ("object", "array")
        and items.get("x-kubernetes-map-type") != "atomic"
    ):
        return [f"{path}: a set list needs scalar (or atomic) items"]
    if list_type not in ("atomic", "set"):
        return [f"{path}: unknown x-kubernetes-list-type {list_type!r}"]
    return []


def _default_errors(schema: Schema, path: str) -> list[str]:
    if "default" not in schema:
        return []
    if path.startswith(".metadata"):
        return [f"{path}: defaults are not allowed in metadata"]
    try:
        ObjectValidator(schema, strict=True).check(copy.deepcopy(schema["default"]))
    except SchemaViolation as exc:
        return [f"{path}: default {schema['default']!r} does not validate: {exc}"]
    return []


def _cel_errors(schema: Schema, path: str) -> list[str]:
    errors = []
    for i, entry in enumerate(schema.get("x-kubernetes-validations", [])):
        if set(entry) - {"rule", "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf"}:
            errors.append(f"{path}: x-kubernetes-validations[{i}] has unknown keys")
        if not entry.get("rule") or not entry.get("message"):
            errors.append(f"{path}: x-kubernetes-validations[{i}] needs a rule and a message")
            continue
        try:
            cel_program(entry["rule"])
        except Exception as exc:  # celpy raises its parser's errors
            errors.append(f"{path}: CEL rule does not compile: {entry['rule']!r}: {str(exc).splitlines()[0]}")
    return errors


_FIELD_REFERENCE = re.compile(r"\b(self|oldSelf)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


#: What the API server declares at a CRD schema's root for CEL whatever the schema says: the
#: object's ``metadata.name`` and ``metadata.generateName`` (Kubernetes' ``ObjectMeta`` subset).
_ROOT_METADATA: Schema = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}},
}


def _unknown_references(schema: Schema, rule: str, root: bool = False) -> list[str]:
    """``self.a.b`` paths in ``rule`` that name no field of ``schema`` (the API server type-checks them)."""
    unknown = []
    if root:
        properties = schema.get("properties", {})
        declared = properties.get("metadata") or {}
        metadata = {
            **_ROOT_METADATA,
            **declared,
            "properties": {**_ROOT_METADATA["properties"], **declared.get("properties", {})},
        }
        schema = {**schema, "properties": {**properties, "metadata": metadata}}
    for match in _FIELD_REFERENCE.finditer(rule):
        node = schema
        for part in match.group(2).lstrip(".").split("."):
            if node.get("type") in ("array", "string") or node.get("x-kubernetes-preserve-unknown-fields"):
                break  # a list's or a string's methods (all, exists, matches, ...) or fields nobody declared
            if isinstance(node.get("additionalProperties"), dict):
                node = node["additionalProperties"]
                continue
            if part not in node.get("properties", {}):
                unknown.append(f"{match.group(1)}{match.group(2)}")
                break
            node = node["properties"][part]
    return unknown


def _rule_placement_errors(schema: Schema, path: str = "", correlatable: bool = True) -> Iterator[str]:
    """Rules naming unknown fields, and transition rules (oldSelf) where the API server has no old value."""
    for entry in schema.get("x-kubernetes-validations", []):
        rule = entry.get("rule", "")
        for reference in _unknown_references(schema, rule, root=not path):
            yield f"{path or '<root>'}: CEL rule refers to an undeclared field {reference}"
        if "oldSelf" in rule and not correlatable:
            yield f"{path or '<root>'}: transition rule (oldSelf) inside a list that is not a map list"
    for sub_path, sub in children(schema, path):
        keeps = correlatable and not (
            sub_path.endswith("[]") and schema.get("x-kubernetes-list-type") != "map"
        )
        yield from _rule_placement_errors(sub, sub_path, keeps)


def structural_errors(root: Schema) -> list[str]:
    """Every way ``root`` breaks the structural-schema rules; empty when it is structural."""
    errors: list[str] = []
    metadata = root.get("properties", {}).get("metadata")
    if metadata is not None and set(metadata.get("properties", {})) - {"name", "generateName"}:
        errors.append(".metadata: only name and generateName may be specified")
    for path, schema in walk(root):
        where = path or "<root>"
        unknown = {k for k in schema if k not in ALLOWED_KEYWORDS and not k.startswith("x-kubernetes-")}
        unknown |= {k for k in schema if k.startswith("x-kubernetes-") and k not in KUBERNETES_EXTENSIONS}
        if unknown:
            errors.append(f"{where}: keywords not allowed in a CRD schema: {sorted(unknown)}")
        if schema.get("uniqueItems") is True:
            errors.append(f"{where}: uniqueItems: true is forbidden (use x-kubernetes-list-type: set)")
        free = schema.get("x-kubernetes-int-or-string") or schema.get("x-kubernetes-preserve-unknown-fields")
        if not schema.get("type") and not free:
            errors.append(f"{where}: no type")
        if schema.get("x-kubernetes-int-or-string") and "type" in schema:
            errors.append(f"{where}: int-or-string must not also set a type")
        if "properties" in schema and "additionalProperties" in schema:
            errors.append(f"{where}: properties and additionalProperties are mutually exclusive")
        if schema.get("type") == "array" and not isinstance(schema.get("items"), dict):
            errors.append(f"{where}: an array needs an items schema")
        if schema.get("type") == "object" and schema.get("additionalProperties") is False:
            errors.append(f"{where}: additionalProperties: false is forbidden")
        missing = set(schema.get("required", [])) - set(schema.get("properties", {}))
        if missing:
            errors.append(f"{where}: required fields without a schema: {sorted(missing)}")
        errors += _junctor_errors(schema, where)
        errors += _list_errors(schema, where)
        errors += _default_errors(schema, path)
        errors += _cel_errors(schema, where)
    errors += _rule_placement_errors(root)
    return errors


# --- Validating objects ------------------------------------------------------------------------


def to_json_schema(schema: Schema) -> Schema:
    """The OpenAPI schema as JSON Schema, with the API server's behaviour made explicit.

    ``nullable`` becomes a ``null`` type, int-or-string an ``anyOf``, a ``set`` list
    ``uniqueItems``; an object with properties and without preserve-unknown-fields refuses
    other fields (what strict field validation reports), and map-list keys are checked by the
    ``x-kubernetes-list-map-keys`` keyword of :data:`KubeValidator`.
    """
    out: Schema = {}
    for key, value in schema.items():
        if key in ("properties",):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = to_json_schema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [to_json_schema(sub) for sub in value]
        elif key in ("x-kubernetes-validations", "description", "default"):
            continue
        else:
            out[key] = value
    if schema.get("nullable") and "type" in schema:
        out["type"] = [schema["type"], "null"]
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in schema:
        out["anyOf"] = INT_OR_STRING
    if schema.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def _list_map_keys(
    validator: Any, keys: list[str], instance: Any, schema: Schema
) -> Iterator[jsonschema.ValidationError]:
    if not isinstance(instance, list):
        return
    seen: dict[tuple[Any, ...], int] = {}
    for i, item in enumerate(instance):
        if not isinstance(item, dict):
            continue
        key = tuple(item.get(k) for k in keys)
        if key in seen:
            yield jsonschema.ValidationError(f"duplicate entry for key {dict(zip(keys, key, strict=True))}")
        seen[key] = i


FORMATS = jsonschema.FormatChecker([])


@FORMATS.checks("int32")
def _int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@FORMATS.checks("int64")
def _int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    if isinstance(value, str):
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


KubeValidator: Any = validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft202012Validator, {"x-kubernetes-list-map-keys": _list_map_keys}
)


class SchemaViolation(Exception):
    """An object the API server would refuse; the message names the field path."""


def field_path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def apply_defaults(schema: Schema, value: Any) -> Any:
    """Fill in ``default:`` values top-down, as the API server does before validation."""
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = apply_defaults(sub, value[name])
        if isinstance(schema.get("additionalProperties"), dict):
            for name in value:
                value[name] = apply_defaults(schema["additionalProperties"], value[name])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


def cel_violations(schema: Schema, value: Any, old: Any = None, path: str = "") -> Iterator[str]:
    """Rules that do not hold for ``value`` (with ``oldSelf`` = ``old``, or ``value`` if None)."""
    old = value if old is None else old
    for entry in schema.get("x-kubernetes-validations", []):
        program = cel_program(entry["rule"])
        try:
            result = program.evaluate({"self": json_to_cel(value), "oldSelf": json_to_cel(old)})
        except Exception as exc:  # an evaluation error fails the rule, as in the API server
            yield f"{path or '<root>'}: {entry['message']} (rule failed: {str(exc).splitlines()[0]})"
            continue
        if not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            yield f"{path or '<root>'}: {entry['message']}"
    if isinstance(value, dict):
        old_dict = old if isinstance(old, dict) else {}
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                yield from cel_violations(
                    sub, value[name], old_dict.get(name, value[name]), f"{path}.{name}".lstrip(".")
                )
        if isinstance(schema.get("additionalProperties"), dict):
            for name, item in value.items():
                yield from cel_violations(schema["additionalProperties"], item, None, f"{path}[{name}]")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from cel_violations(schema["items"], item, None, f"{path}[{i}]")


class ObjectValidator:
    """Validates objects against one version's ``openAPIV3Schema``."""

    def __init__(self, schema: Schema, *, strict: bool = True) -> None:
        self.schema = schema
        self.json_schema = to_json_schema(schema) if strict else schema
        self.validator = KubeValidator(self.json_schema, format_checker=FORMATS)

    def errors(self, obj: Any, old: Any = None) -> list[str]:
        found = [
            f"{field_path(e.absolute_path)}: {e.message}"
            for e in sorted(self.validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
        ]
        if found:
            return found
        defaulted = apply_defaults(self.schema, copy.deepcopy(obj))
        old_defaulted = apply_defaults(self.schema, copy.deepcopy(old)) if old is not None else None
        return list(cel_violations(self.schema, defaulted, old_defaulted))

    def check(self, obj: Any, old: Any = None) -> None:
        errors = self.errors(obj, old)
        if errors:
            raise SchemaViolation("; ".join(errors))
