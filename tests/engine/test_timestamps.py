"""The time convention: POSIX seconds inside, RFC 3339 (metav1.Time / MicroTime) on the wire."""

from __future__ import annotations

import pytest

from kadmit.engine import parse
from kadmit.engine.errors import InvalidObject
from kadmit.engine.timestamps import format_micro_time, format_time, parse_time

T = 1_767_323_045.0  # 2026-01-02T03:04:05Z


def test_formats_metav1_time_in_whole_seconds() -> None:
    assert format_time(T) == "2026-01-02T03:04:05Z"
    assert format_time(T + 0.999) == "2026-01-02T03:04:05Z"  # truncated, as Go's Format does
    assert format_time(0.0) == "1970-01-01T00:00:00Z"


def test_formats_metav1_micro_time_with_six_digits() -> None:
    assert format_micro_time(T + 0.123456) == "2026-01-02T03:04:05.123456Z"
    assert format_micro_time(T) == "2026-01-02T03:04:05.000000Z"
    assert format_micro_time(T + 0.9999996) == "2026-01-02T03:04:06.000000Z"  # to the nearest µs


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2026-01-02T03:04:05Z", T),
        ("2026-01-02T03:04:05.5Z", T + 0.5),
        ("2026-01-02T03:04:05.123456Z", T + 0.123456),
        ("2026-01-02T03:04:05.123456789Z", T + 0.123456789),  # RFC3339Nano
        ("2026-01-02T04:34:05+01:30", T),
        ("2026-01-01T22:04:05-05:00", T),
        ("2026-01-02T03:04:05+00:00", T),
    ],
)
def test_parses_what_the_api_writes(text: str, seconds: float) -> None:
    assert parse_time(text) == pytest.approx(seconds, abs=1e-6)


@pytest.mark.parametrize("seconds", [T, T + 0.25, 0.0, T + 0.123456])
def test_round_trips(seconds: float) -> None:
    assert parse_time(format_micro_time(seconds)) == pytest.approx(seconds, abs=1e-6)
    assert parse_time(format_time(seconds)) == float(int(seconds))


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-02",
        "2026-01-02 03:04:05Z",
        "2026-01-02T03:04:05",  # no zone
        "2026-W01-5T03:04:05Z",
        "2026-13-02T03:04:05Z",
        "2026-02-30T03:04:05Z",
        "2026-01-02T24:00:00Z",
        "2026-01-02T03:04:60Z",
        "2026-01-02T03:04:05.Z",
        "2026-01-02T03:04:05.1234567890Z",
        "2026-01-02T03:04:05+24:00",
        "2026-01-02T03:04:05Zjunk",
        "",
    ],
)
def test_refuses_anything_else_naming_the_value(text: str) -> None:
    with pytest.raises(ValueError, match=repr(text).replace(".", r"\.").replace("+", r"\+")):
        parse_time(text)


def test_a_bad_time_in_a_workload_names_its_field() -> None:
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
        "status": {"requeueState": {"requeueAt": "soon"}},
    }
    with pytest.raises(InvalidObject, match=r"status\.requeueState\.requeueAt.*'soon'"):
        parse.workload(wl)
