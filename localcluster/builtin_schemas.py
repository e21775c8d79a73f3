"""OpenAPI schemas of the built-in kinds, derived from kubernetes-asyncio's generated models.

The models carry every field name (``attribute_map``) and type (``openapi_types``) of the Go
types, which is what kubectl's ``explain`` and the server's unknown-field detection need. The
patch strategies and list-map keys are added from :mod:`kadmit.localcluster.patches`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from kubernetes_asyncio.client import models

from kadmit.localcluster.objects import Obj, json_type
from kadmit.localcluster.patches import MERGE_KEYS, MERGED_SCALAR_LISTS
from kadmit.localcluster.quantity import Quantity, QuantityError

# Quantities are strings in the models but accept numbers on the wire (``cpu: 1``).
_QUANTITY_MAPS = {"limits", "requests", "capacity", "allocatable", "hard", "used", "overhead"}
_INT_OR_STRING = {"IntOrString"}
REF_PREFIX = "#/components/schemas/"
_PORT_KEYS = {"V1ContainerPort": "containerPort", "V1ServicePort": "port"}
# The models' scalar type names: their JSON types, and the OpenAPI formats of those that have one.
_SCALARS = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "datetime": "string",
    "date": "string",
}
_FORMATS = {"int": "int64", "float": "double", "datetime": "date-time", "date": "date"}


def model_class(name: str) -> Any:
    return getattr(models, name, None)


def definition_name(model: str) -> str:
    """A schema name in the style of the real server (``io.k8s.api.core.v1.Pod``) is not needed;
    model names are unique and readable, so they are used as they are."""
    return model


@functools.cache
def model_schema(model: str) -> Obj:
    """The object schema of one model; nested models appear as ``$ref``."""
    cls = model_class(model)
    if cls is None:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    properties: Obj = {}
    for attr, type_name in cls.openapi_types.items():
        wire = cls.attribute_map[attr]
        properties[wire] = _type_schema(type_name, wire)
    schema: Obj = {"type": "object", "properties": properties}
    doc = (cls.__doc__ or "").strip()
    if doc and "NOTE: This class is auto generated" not in doc.splitlines()[0]:
        schema["description"] = doc.splitlines()[0]
    return schema


def _type_schema(type_name: str, wire: str) -> Obj:
    if type_name.startswith("list["):
        items = _type_schema(type_name[5:-1], wire)
        schema: Obj = {"type": "array", "items": items}
        key = MERGE_KEYS.get(wire)
        if wire == "ports":  # only container and Service ports merge, each on its own key
            key = _PORT_KEYS.get(type_name[5:-1])
        if key is not None and "$ref" in items:
            schema["x-kubernetes-patch-strategy"] = "merge"
            schema["x-kubernetes-patch-merge-key"] = key
        elif wire in MERGED_SCALAR_LISTS:
            schema["x-kubernetes-patch-strategy"] = "merge"
        return schema
    match = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if match:
        if wire in _QUANTITY_MAPS:
            return {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}}
        return {"type": "object", "additionalProperties": _type_schema(match.group(1), wire)}
    if type_name in _SCALARS:
        scalar = {"type": _SCALARS[type_name]}
        if type_name in _FORMATS:
            scalar["format"] = _FORMATS[type_name]
        return scalar
    if type_name == "object":
        return (
            {"x-kubernetes-int-or-string": True}
            if wire in ("port", "targetPort", "maxSurge", "maxUnavailable", "minAvailable")
            else {}
        )
    return {"$ref": REF_PREFIX + type_name}


def closure(model: str) -> dict[str, Obj]:
    """The schema of ``model`` and of every model it references."""
    found: dict[str, Obj] = {}
    pending = [model]
    while pending:
        name = pending.pop()
        if name in found:
            continue
        schema = model_schema(name)
        found[name] = schema
        pending.extend(_refs(schema))
    return found


def _refs(schema: Any) -> list[str]:
    out: list[str] = []
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            out.append(ref[len(REF_PREFIX) :])
        for value in schema.values():
            out.extend(_refs(value))
    elif isinstance(schema, list):
        for value in schema:
            out.extend(_refs(value))
    return out


# A compiled shape for field checks: a model name (an object with declared fields),
# ("list", shape), ("map", shape), ("scalar", JSON type), or None (anything goes).
Shape = Any
_GO_TYPES = {
    "string": "string",
    "integer": "int64",
    "number": "float64",
    "boolean": "bool",
    "quantity": "resource.Quantity",
}


@functools.cache
def _fields(model: str) -> dict[str, Shape] | None:
    """Declared fields of a model and the shape of each; None when the model is free-form."""
    cls = model_class(model)
    if cls is None:
        return None
    fields: dict[str, Shape] = {}
    for attr, type_name in cls.openapi_types.items():
        wire = cls.attribute_map[attr]
        if wire in _QUANTITY_MAPS and type_name.startswith("dict("):
            fields[wire] = ("map", ("scalar", "quantity"))
        else:
            fields[wire] = _shape(type_name)
    return fields


def _shape(type_name: str) -> Shape:
    if type_name.startswith("list["):
        return ("list", _shape(type_name[5:-1]))
    match = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if match:
        return ("map", _shape(match.group(1)))
    if type_name in _SCALARS:
        return ("scalar", _SCALARS[type_name])
    if type_name == "object":
        return None
    return type_name


def unknown_fields(model: str, obj: Obj) -> list[str]:
    """Paths of fields in ``obj`` that the model does not declare (``spec.template.spec.foo``)."""
    return check_fields(model, obj)[0]


def check_fields(model: str, obj: Any, path: str = "") -> tuple[list[str], list[str]]:
    """(undeclared field paths, decoding errors) for ``obj``: wrong types as the Go JSON decoder
    words them, quantities that ``resource.Quantity`` refuses as apimachinery words it."""
    unknown: list[str] = []
    wrong: list[str] = []
    _walk(obj, model, path, unknown, wrong)
    return unknown, wrong


def _unmarshal_error(value: Any, path: str, go_type: str) -> str:
    """``encoding/json``'s UnmarshalTypeError, which calls a JSON boolean a bool."""
    found = "bool" if isinstance(value, bool) else json_type(value)
    return f"json: cannot unmarshal {found} into Go struct field {path} of type {go_type}"


def _fits(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, str | int | float) and not isinstance(value, bool)  # quantity


def _walk(value: Any, shape: Shape, path: str, unknown: list[str], wrong: list[str]) -> None:
    if shape is None or value is None:
        return  # free-form, or JSON null (the Go decoder leaves the zero value)
    if isinstance(shape, str):
        fields = _fields(shape)
        if fields is None:
            return
        if not isinstance(value, dict):
            wrong.append(_unmarshal_error(value, path or shape, shape))
            return
        for key, child in value.items():
            child_path = f"{path}.{key}" if path else key
            if key not in fields:
                unknown.append(child_path)
            else:
                _walk(child, fields[key], child_path, unknown, wrong)
    elif shape[0] == "scalar":
        if not _fits(value, shape[1]):
            wrong.append(_unmarshal_error(value, path, _GO_TYPES[shape[1]]))
        elif shape[1] == "quantity":
            try:
                Quantity.parse(value)
            except QuantityError as exc:
                wrong.append(exc.reason)
    elif shape[0] == "list":
        if not isinstance(value, list):
            wrong.append(_unmarshal_error(value, path, "[]"))
            return
        for i, child in enumerate(value):
            _walk(child, shape[1], f"{path}[{i}]", unknown, wrong)
    elif not isinstance(value, dict):
        wrong.append(_unmarshal_error(value, path, "map"))
    else:
        for key, child in value.items():
            _walk(child, shape[1], f"{path}.{key}", unknown, wrong)
