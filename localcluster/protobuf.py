"""Kubernetes protobuf request bodies, decoded into the dict the same object's JSON would give.

kubectl's imperative commands (``create namespace|job|quota|configmap|secret|...``) post their
object as ``application/vnd.kubernetes.protobuf`` and client-go has no fallback to JSON, so the
local API server reads this format too. A body is the magic ``k8s\\x00`` and a
``runtime.Unknown`` envelope (``typeMeta{apiVersion, kind}``, ``raw``, ``contentEncoding``,
``contentType``) whose ``raw`` is the typed message; the fields of each message come from
:mod:`kadmit.localcluster.protoschema`. The wire format is read by hand: the ``protobuf`` package
would want generated classes for every message, or its internal decoder API.

Zero values follow JSON's ``omitempty``: gogo-protobuf writes every non-pointer field, so a
zero there is dropped, while a pointer field on the wire was set and keeps its ``false``/``0``.
"""

from __future__ import annotations

import base64
import json
import logging
import struct
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from kadmit.localcluster.errors import bad_request, unsupported_media_type
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.protoschema import ANY_VERSION, MESSAGES, STRICT, TOP_LEVEL, Field, Message
from kadmit.localcluster.timestamps import format_time

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
MAX_DEPTH = 100  # deeper than any real object; bounds hostile nesting of RawExtensions

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
WIRE_TYPES = {
    "int32": VARINT,
    "int64": VARINT,
    "uint32": VARINT,
    "uint64": VARINT,
    "bool": VARINT,
    "double": FIXED64,
    "float": FIXED32,
}
EMPTY: dict[int, int | bytes] = {VARINT: 0, FIXED64: bytes(8), FIXED32: bytes(4), LENGTH: b""}
_unknown_seen: set[tuple[str, int]] = set()


class MalformedProtobuf(ValueError):
    """The bytes are not a well-formed message (400)."""


class UnsupportedProtobuf(ValueError):
    """Well-formed, but naming something this server has no table for (415: send JSON)."""


def decode_body(raw: bytes) -> Obj:
    """A request body as the API handlers take it; errors are ``Status`` answers, never a 500."""
    try:
        return decode_object(raw)
    except MalformedProtobuf as exc:
        raise bad_request(f"the request body is not valid protobuf: {exc}") from None
    except UnsupportedProtobuf as exc:
        raise unsupported_media_type(str(exc)) from None


def decode_object(raw: bytes, depth: int = 0) -> Obj:
    """``k8s\\x00`` + ``runtime.Unknown`` -> ``{"apiVersion", "kind", ...fields}``."""
    if not raw.startswith(MAGIC):
        raise MalformedProtobuf("it does not start with the magic bytes k8s\\x00")
    api_version = kind = encoding = content_type = ""
    body = b""
    for number, wire, value in _fields(raw[len(MAGIC) :]):
        if number == 1 and wire == LENGTH:
            for inner, inner_wire, text in _fields(_bytes(value)):
                if inner in (1, 2) and inner_wire == LENGTH:
                    if inner == 1:
                        api_version = _text(text, "typeMeta.apiVersion")
                    else:
                        kind = _text(text, "typeMeta.kind")
        elif number == 2 and wire == LENGTH:
            body = _bytes(value)
        elif number == 3 and wire == LENGTH:
            encoding = _text(value, "contentEncoding")
        elif number == 4 and wire == LENGTH:
            content_type = _text(value, "contentType")
    if not kind or not api_version:
        raise MalformedProtobuf("the runtime.Unknown envelope names no apiVersion and kind")
    if encoding:
        raise UnsupportedProtobuf(
            f"protobuf bodies with contentEncoding {encoding!r} are not supported; send JSON"
        )
    if content_type and content_type != MEDIA_TYPE:
        raise UnsupportedProtobuf(f"protobuf envelopes holding {content_type!r} are not supported; send JSON")
    name = TOP_LEVEL.get((api_version, kind)) or ANY_VERSION.get(kind)
    if name is None:
        kinds = ", ".join(sorted({k for _, k in TOP_LEVEL} | set(ANY_VERSION)))
        raise UnsupportedProtobuf(
            f"protobuf bodies are supported for {kinds} only, not {api_version} {kind}; send JSON"
        )
    obj: Obj = {"apiVersion": api_version, "kind": kind}
    obj.update(_message(MESSAGES[name], body, depth + 1))
    return obj


# -- the wire format -----------------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    if pos < len(buf) and buf[pos] < 0x80:  # most keys, lengths and numbers fit in one byte
        return buf[pos], pos + 1
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedProtobuf("a varint runs past the end of its message")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise MalformedProtobuf("a varint is longer than 10 bytes")


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(number, wire type, value)``: an int for varints, the bytes for the other wire types."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise MalformedProtobuf("a field number is 0")
        if wire == VARINT:
            value, pos = _varint(buf, pos)
            yield number, wire, value
            continue
        if wire == LENGTH:
            size, pos = _varint(buf, pos)
        elif wire == FIXED64:
            size = 8
        elif wire == FIXED32:
            size = 4
        else:
            raise MalformedProtobuf(f"field {number} has wire type {wire}, which Kubernetes never writes")
        if pos + size > end:
            raise MalformedProtobuf(f"field {number} runs past the end of its message")
        yield number, wire, buf[pos : pos + size]
        pos += size


def _bytes(value: int | bytes) -> bytes:
    assert isinstance(value, bytes)  # callers check the wire type first
    return value


def _text(value: int | bytes, what: str) -> str:
    try:
        return _bytes(value).decode()
    except UnicodeDecodeError:
        raise MalformedProtobuf(f"{what} is not valid UTF-8") from None


# -- messages ------------------------------------------------------------------------------------


def _message(message: Message, buf: bytes, depth: int) -> Obj:
    if depth > MAX_DEPTH:
        raise MalformedProtobuf(f"objects nest deeper than {MAX_DEPTH} levels")
    out: Obj = {}
    for number, wire, value in _fields(buf):
        field = message.fields.get(number)
        if field is None:
            _unknown(message, number)
            continue
        where = field.where
        if field.map:
            key, item = _map_entry(field, _expect(value, wire, LENGTH, where), depth, where)
            out.setdefault(field.name, {})[key] = item
        elif field.repeated:
            items = out.setdefault(field.name, [])
            expected = WIRE_TYPES.get(field.type, LENGTH)
            if wire == LENGTH and expected != LENGTH:  # packed scalars
                items.extend(_packed(field, _bytes(value), where))
            else:
                items.append(_value(field, _expect(value, wire, expected, where), depth, where))
        elif not field.name:  # a Go struct embedded inline
            out.update(_message(MESSAGES[field.type], _bytes(_expect(value, wire, LENGTH, where)), depth + 1))
        else:
            item = _value(
                field, _expect(value, wire, WIRE_TYPES.get(field.type, LENGTH), where), depth, where
            )
            if field.keep_zero or not _zero(item):
                out[field.name] = item
            else:
                out.pop(field.name, None)
    return out


def _unknown(message: Message, number: int) -> None:
    if message.name in STRICT:
        raise UnsupportedProtobuf(
            f"field {number} of {message.name} ({STRICT[message.name]}) is not known to this server; "
            "send JSON"
        )
    if (message.name, number) not in _unknown_seen:
        _unknown_seen.add((message.name, number))
        log.warning("skipping unknown protobuf field %d of %s (a newer client?)", number, message.name)


def _expect(value: int | bytes, wire: int, expected: int, where: str) -> int | bytes:
    if wire != expected:
        raise MalformedProtobuf(f"{where} has wire type {wire}, expected {expected}")
    return value


def _map_entry(field: Field, entry: int | bytes, depth: int, where: str) -> tuple[str, Any]:
    """A map entry is a message ``{1: key, 2: value}``; either may be absent (then it is empty)."""
    key = ""
    raw_value: int | bytes | None = None
    expected = WIRE_TYPES.get(field.type, LENGTH)
    for number, wire, value in _fields(_bytes(entry)):
        if number == 1:
            key = _text(_expect(value, wire, LENGTH, where + " key"), where + " key")
        elif number == 2:
            raw_value = _expect(value, wire, expected, where)
    if raw_value is None:
        raw_value = EMPTY[expected]
    return key, _value(field, raw_value, depth, f"{where}[{key}]")


def _packed(field: Field, buf: bytes, where: str) -> list[Any]:
    expected = WIRE_TYPES[field.type]
    items: list[Any] = []
    pos = 0
    while pos < len(buf):
        if expected == VARINT:
            value, pos = _varint(buf, pos)
            items.append(_scalar(field.type, value, where))
        else:
            size = 8 if expected == FIXED64 else 4
            if pos + size > len(buf):
                raise MalformedProtobuf(f"{where} has a truncated packed value")
            items.append(_scalar(field.type, buf[pos : pos + size], where))
            pos += size
    return items


def _value(field: Field, value: int | bytes, depth: int, where: str) -> Any:
    if field.type in WIRE_TYPES or field.type in ("string", "bytes"):
        return _scalar(field.type, value, where)
    buf = _bytes(value)
    special = SPECIAL_TYPES.get(field.type)
    if special is not None:
        return special(buf, depth, where)
    return _message(MESSAGES[field.type], buf, depth + 1)


def _scalar(type_: str, value: int | bytes, where: str) -> Any:
    if isinstance(value, int):
        if type_ == "bool":
            return value != 0
        if type_ in ("int32", "int64"):
            value = value - (1 << 64) if value >= 1 << 63 else value
            return value if type_ == "int64" else (value + (1 << 31)) % (1 << 32) - (1 << 31)
        return value & 0xFFFFFFFF if type_ == "uint32" else value & 0xFFFFFFFFFFFFFFFF
    if type_ == "string":
        return _text(value, where)
    if type_ == "bytes":
        return base64.b64encode(value).decode()  # as encoding/json writes []byte
    return struct.unpack("<d" if type_ == "double" else "<f", value)[0]


def _zero(value: Any) -> bool:
    """What ``omitempty`` leaves out (a message, even an empty one, is always kept)."""
    return value is None or (not isinstance(value, dict) and value in ("", 0, False))


# -- types with a JSON form of their own -----------------------------------------------------------


def _plain(buf: bytes, where: str, strings: tuple[int, ...] = ()) -> dict[int, int | bytes]:
    """The last value of each field number (the special types are flat messages)."""
    fields: dict[int, int | bytes] = {}
    for number, wire, value in _fields(buf):
        fields[number] = _expect(value, wire, LENGTH if number in strings else VARINT, where)
    return fields


def _quantity(buf: bytes, depth: int, where: str) -> str:
    return _text(_plain(buf, where, strings=(1,)).get(1, b""), where)


def _int_or_string(buf: bytes, depth: int, where: str) -> int | str:
    fields = _plain(buf, where, strings=(3,))
    kind = fields.get(1, 0)
    if kind == 1:
        return _text(fields.get(3, b""), where)
    if kind != 0:
        raise MalformedProtobuf(f"{where} is an IntOrString of unknown type {kind!r}")
    return int(_scalar("int32", fields.get(2, 0), where))


def _time(buf: bytes, depth: int, where: str, micro: bool = False) -> str | None:
    fields = _plain(buf, where)
    seconds, nanos = _scalar("int64", fields.get(1, 0), where), _scalar("int32", fields.get(2, 0), where)
    if seconds == 0 and nanos == 0:
        return None  # Go's zero time, which JSON writes as null
    try:
        moment = datetime.fromtimestamp(seconds, UTC).replace(microsecond=max(0, nanos) // 1000)
    except (OverflowError, ValueError, OSError):
        raise MalformedProtobuf(f"{where} is out of range") from None
    return format_time(moment, micro=micro)


def _micro_time(buf: bytes, depth: int, where: str) -> str | None:
    return _time(buf, depth, where, micro=True)


def _raw_json(buf: bytes, depth: int, where: str) -> Any:
    """``FieldsV1`` and ``RawExtension``: field 1 holds JSON, or a nested protobuf object."""
    raw = _bytes(_plain(buf, where, strings=(1,)).get(1, b""))
    if not raw:
        return None
    if raw.startswith(MAGIC):
        return decode_object(raw, depth + 1)
    try:
        return json.loads(raw)
    except ValueError:
        raise MalformedProtobuf(f"{where} holds neither JSON nor a protobuf object") from None


SPECIAL_TYPES: dict[str, Callable[[bytes, int, str], Any]] = {
    "resource.Quantity": _quantity,
    "intstr.IntOrString": _int_or_string,
    "meta.Time": _time,
    "meta.MicroTime": _micro_time,
    "meta.FieldsV1": _raw_json,
    "runtime.RawExtension": _raw_json,
}


def reset_unknown_fields_log() -> None:
    """Forget which unknown fields were logged (for tests that check the log)."""
    _unknown_seen.clear()


__all__ = ["MEDIA_TYPE", "MalformedProtobuf", "UnsupportedProtobuf", "decode_body", "decode_object"]
