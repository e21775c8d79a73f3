"""Strict reading of Kubernetes YAML, as the API server and ``kubectl`` read it.

:func:`load` refuses duplicate keys (YAML allows them, the API server's strict decoding does not)
and remembers the line of every key; :func:`errors` checks an object against its CRD's OpenAPI
schema (``manifests/crds``): unknown fields, wrong types and values outside an ``enum``, each
reported with its field path and line — ``kubectl``'s ``unknown field "spec.nominalQuta"``.
"""

from __future__ import annotations

import functools
import pathlib
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

Obj = dict[str, Any]
Path = tuple[str | int, ...]

OBJECT_META = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "labels",
        "annotations",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "ownerReferences",
        "finalizers",
        "managedFields",
        "selfLink",
    }
)
"""The fields of ``metadata`` (ObjectMeta): anything else is unknown."""


class StrictError(ValueError):
    """A document the API server would refuse: ``line`` is 1-based (0 when unknown)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass
class Document:
    """One YAML document: the object and the line of each mapping key (by the mapping's id)."""

    obj: Any
    line: int
    """The line the document starts at."""
    _lines: dict[int, dict[Any, int]] = field(default_factory=dict, repr=False)

    def line_of(self, path: Path) -> int:
        """The line of the field at ``path`` (of its nearest ancestor the file names)."""
        best, value = self.line, self.obj
        for part in path:
            lines = self._lines.get(id(value), {}) if isinstance(value, dict) else {}
            if part in lines:
                best = lines[part]
            try:
                value = value[part]
            except (KeyError, IndexError, TypeError):
                break
        return best


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and keeps each key's line."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.key_lines: dict[int, dict[Any, int]] = {}

    def construct_strict_map(self, node: yaml.MappingNode) -> Iterator[dict[Any, Any]]:
        data: dict[Any, Any] = {}
        yield data
        self.flatten_mapping(node)
        lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, (str, int, float, bool)) and key in lines:
                raise StrictError(line, f'duplicate field "{key}" (first at line {lines[key]})')
            if isinstance(key, (str, int, float, bool)):
                lines[key] = line
        data.update(self.construct_mapping(node))
        self.key_lines[id(data)] = lines


_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_strict_map)


def load(text: str) -> list[Document]:
    """The documents of ``text`` (empty ones skipped); :class:`StrictError` on a duplicate key,
    ``yaml.YAMLError`` on bad YAML."""
    loader = _Loader(text)
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            obj = loader.construct_document(node)
            if obj is not None:
                documents.append(Document(obj, node.start_mark.line + 1, loader.key_lines))
    finally:
        loader.dispose()
    return documents


class ReadError(ValueError):
    """A file that cannot be read, or is not YAML: one line, without the file's name."""


def read_documents(name: str) -> list[Document]:
    """The documents of the file ``name`` (``-``: standard input), as strictly as the API server
    reads them: :class:`StrictError` (with its line) on a duplicate key, :class:`ReadError` when
    the file cannot be read or is not YAML (with the line where the parser stopped)."""
    try:
        text = sys.stdin.read() if name == "-" else pathlib.Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror or exc}") from None
    try:
        return load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise ReadError(f"invalid YAML{line}: {problem}") from None


@functools.cache
def _schemas() -> dict[tuple[str, str], Obj]:
    """(apiVersion, kind) → the openAPIV3Schema of the CRDs kadmit ships."""
    from kadmit.controller.local_setup import crd_documents

    found: dict[tuple[str, str], Obj] = {}
    for crd in crd_documents():
        spec = crd.get("spec") or {}
        group, kind = spec.get("group"), (spec.get("names") or {}).get("kind")
        for version in spec.get("versions") or []:
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if schema is not None:
                found[(f"{group}/{version['name']}", str(kind))] = schema
    return found


def schema_for(api_version: str, kind: str) -> Obj | None:
    return _schemas().get((api_version, kind))


def errors(obj: Mapping[str, Any], schema: Obj) -> Iterator[tuple[Path, str]]:
    """What the API server refuses in ``obj`` (unknown fields, types, enums): each field's path
    and the message, worded as the API server and kubectl word it."""
    top = dict(schema)
    properties = dict(top.get("properties") or {})
    properties.pop("metadata", None)
    top["properties"] = properties
    for key in ("apiVersion", "kind"):
        properties.setdefault(key, {"type": "string"})
    metadata = obj.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            yield ("metadata",), _invalid(("metadata",), metadata, "object")
        else:
            for key in metadata:
                if key not in OBJECT_META:
                    yield ("metadata", key), _unknown(("metadata", key))
            for key in ("labels", "annotations"):
                values = metadata.get(key)
                if values is not None and not (
                    isinstance(values, dict) and all(isinstance(v, str) for v in values.values())
                ):
                    message = f"metadata.{key}: Invalid value: must be a map of strings"
                    yield ("metadata", key), message
    yield from _walk({k: v for k, v in obj.items() if k != "metadata"}, top, ())


def _walk(value: Any, schema: Obj, path: Path) -> Iterator[tuple[Path, str]]:
    if value is None:
        return  # null: the API server drops it (nullable or not, kubectl sends nothing)
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            yield path, _invalid(path, value, "integer or string")
        return
    kind = schema.get("type")
    if kind in JSON_TYPES and not _of_type(value, str(kind)):
        yield path, _invalid(path, value, str(kind))
        return
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        supported = ", ".join(f'"{v}"' for v in enum)
        yield path, f'{field_path(path)}: Unsupported value: "{value}": supported values: {supported}'
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        for key, item in value.items():
            if properties is not None and key in properties:
                yield from _walk(item, properties[key], (*path, key))
            elif isinstance(additional, dict):
                yield from _walk(item, additional, (*path, key))
            elif not preserve and additional is not True and (properties is not None or additional is False):
                yield (*path, key), _unknown((*path, key))
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                yield from _walk(item, items, (*path, index))


def _unknown(path: Path) -> str:
    return f'unknown field "{field_path(path)}"'


def _invalid(path: Path, value: Any, expected: str) -> str:
    """The API server's wording: ``spec.x: Invalid value: "string": must be of type integer``."""
    return f'{field_path(path)}: Invalid value: "{_type_name(value)}": must be of type {expected}'


JSON_TYPES: dict[str, type] = {
    "boolean": bool,  # before integer: a bool is an int to Python, never to JSON
    "integer": int,
    "number": float,
    "string": str,
    "array": list,
    "object": dict,
}
"""The OpenAPI schema types by the Python type a YAML value decodes to, in the order to ask."""


def _type_name(value: Any) -> str:
    return next((name for name, kind in JSON_TYPES.items() if isinstance(value, kind)), type(value).__name__)


def _of_type(value: Any, kind: str) -> bool:
    """Whether ``value`` is of the schema type ``kind`` (an integer is a number too)."""
    name = _type_name(value)
    return name == kind or (kind == "number" and name == "integer")


def field_path(path: Path) -> str:
    """``spec.resourceGroups[0].flavors[0].resources[1].nominalQuta``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
