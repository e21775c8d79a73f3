"""The message tables against the protobuf descriptors compiled into kubectl itself.

gogo-protobuf registers every ``generated.proto`` of k8s.io/api and k8s.io/apimachinery in the
binary as a gzipped ``FileDescriptorProto``; reading them back checks each table entry's field
number, JSON name and type against the very client whose bodies the server decodes. (Which Go
fields are pointers is not in a descriptor; the decoding tests cover the ones that matter.)
"""

from __future__ import annotations

import os
import re
import shutil
import zlib
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from kadmit.localcluster.protoschema import MESSAGES, SPECIAL

PACKAGES = {
    "k8s.io.api.core.v1": "core",
    "k8s.io.api.batch.v1": "batch",
    "k8s.io.api.apps.v1": "apps",
    "k8s.io.api.policy.v1": "policy",
    "k8s.io.api.rbac.v1": "rbac",
    "k8s.io.api.scheduling.v1": "scheduling",
    "k8s.io.api.authorization.v1": "authorization",
    "k8s.io.api.authentication.v1": "authentication",
    "k8s.io.apimachinery.pkg.apis.meta.v1": "meta",
    "k8s.io.apimachinery.pkg.api.resource": "resource",
    "k8s.io.apimachinery.pkg.util.intstr": "intstr",
    "k8s.io.apimachinery.pkg.runtime": "runtime",
}
SCALARS = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 8: "bool", 9: "string"}
SCALARS |= {12: "bytes", 13: "uint32"}
REPEATED = 3
Fields = dict[int, tuple[str, str]]  # number -> (name, type in the table's notation)


def read(buf: bytes) -> Iterator[tuple[int, Any]]:
    """Just enough of the wire format for descriptors: varints and length-delimited fields."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        if key & 7 == 0:
            value, pos = varint(buf, pos)
            yield key >> 3, value
        else:
            assert key & 7 == 2, f"descriptors use wire types 0 and 2, not {key & 7}"
            size, pos = varint(buf, pos)
            yield key >> 3, buf[pos : pos + size]
            pos += size


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def short(type_name: str) -> str:
    package, _, name = type_name.lstrip(".").rpartition(".")
    return f"{PACKAGES.get(package, package)}.{name}"


def descriptor_files(binary: bytes) -> Iterator[bytes]:
    for match in re.finditer(rb"\x1f\x8b\x08\x00\x00\x00\x00\x00", binary):
        try:
            data = zlib.decompressobj(31).decompress(binary[match.start() : match.start() + 1_000_000])
        except zlib.error:
            continue
        if data.startswith(b"\n") and b"generated.proto" in data[:100]:
            yield data


@cache
def kubectl_messages() -> dict[str, Fields]:
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl is not installed")
    with open(os.path.realpath(path), "rb") as binary:
        files = list(descriptor_files(binary.read()))
    raw: dict[str, list[dict[int, Any]]] = {}
    map_values: dict[str, dict[int, Any]] = {}  # a map's entry message -> its value field

    def walk(message: bytes, prefix: str) -> None:
        parts = list(read(message))
        name = prefix + "." + next(v for n, v in parts if n == 1).decode()
        fields = [dict(read(v)) for n, v in parts if n == 2]
        for n, v in parts:
            if n == 3:
                walk(v, name)
            if n == 7 and dict(read(v)).get(7):  # options.map_entry
                map_values[name] = next(f for f in fields if f[3] == 2)
        raw[name] = fields

    for data in files:
        parts = list(read(data))
        package = next(v for n, v in parts if n == 2).decode()
        for n, v in parts:
            if n == 4:
                walk(v, "." + package)
    if not raw:
        pytest.skip("this kubectl carries no protobuf descriptors")

    def notation(field: dict[int, Any]) -> str:
        if field[5] in SCALARS:
            base = SCALARS[field[5]]
        else:
            base = short(field[6].decode())
            value = map_values.get(field[6].decode())
            if value is not None:
                return "{}" + notation(value)
        return ("[]" if field.get(4) == REPEATED else "") + base

    return {short(name): {f[3]: (f[1].decode(), notation(f)) for f in fields} for name, fields in raw.items()}


# Proto field names that are not their JSON key (the table is keyed by JSON): TokenRequest's
# BoundObjectReference.UID is ``name=uID`` in its protobuf tag and ``uid`` in JSON.
JSON_KEYS = {"uID": "uid"}


def test_every_table_entry_matches_kubectl() -> None:
    compiled = kubectl_messages()
    mismatches = []
    for name, message in MESSAGES.items():
        real = compiled.get(name)
        if real is None:
            mismatches.append(f"{name}: no such message in kubectl")
            continue
        for number, field in message.fields.items():
            ours = ("{}" if field.map else "[]" if field.repeated else "") + field.type
            got = real.get(number)
            if got is None:
                mismatches.append(f"{name}: kubectl has no field {number}")
            elif (field.name and JSON_KEYS.get(got[0], got[0]) != field.name) or got[1] != ours:
                mismatches.append(f"{name} field {number}: ours {field.name or '-'} {ours}, kubectl's {got}")
        # Every field kubectl can send has a place in the table (none is silently skipped).
        missing = sorted(set(real) - set(message.fields))
        if missing:
            mismatches.append(f"{name}: fields {missing} of kubectl are not in the table")
    assert mismatches == []


def test_special_types_have_the_layout_the_decoder_assumes() -> None:
    compiled = kubectl_messages()
    assert compiled["resource.Quantity"] == {1: ("string", "string")}
    assert compiled["intstr.IntOrString"] == {
        1: ("type", "int64"),
        2: ("intVal", "int32"),
        3: ("strVal", "string"),
    }
    assert (
        compiled["meta.Time"]
        == compiled["meta.MicroTime"]
        == {1: ("seconds", "int64"), 2: ("nanos", "int32")}
    )
    assert compiled["meta.FieldsV1"] == {1: ("Raw", "bytes")}
    assert compiled["runtime.RawExtension"] == {1: ("raw", "bytes")}
    assert compiled["runtime.Unknown"] == {
        1: ("typeMeta", "runtime.TypeMeta"),
        2: ("raw", "bytes"),
        3: ("contentEncoding", "string"),
        4: ("contentType", "string"),
    }
    assert compiled["runtime.TypeMeta"] == {1: ("apiVersion", "string"), 2: ("kind", "string")}
    assert set(compiled) >= SPECIAL
