"""Kubernetes quantities: exact parsing into milli-units and Kueue's canonical printing."""

from __future__ import annotations

import pytest

from kadmit.engine.quantity import QuantityError, format_milli, to_milli


@pytest.mark.parametrize(
    ("resource", "text", "milli"),
    [
        ("cpu", "1", 1000),
        ("cpu", 9, 9000),
        ("cpu", "500m", 500),
        ("cpu", "1.5", 1500),
        ("cpu", "0.1m", 1),  # rounded up, as MilliValue() does
        ("cpu", "1e3", 1_000_000),
        ("cpu", "2k", 2_000_000),
        ("memory", "36Gi", 36 * 2**30 * 1000),
        ("memory", "200Mi", 200 * 2**20 * 1000),
        ("memory", "1.5Ki", 1536 * 1000),
        ("memory", "1m", 1000),  # Value() rounds 0.001 up to 1
        ("nvidia.com/gpu", "9", 9000),
        ("pods", "0", 0),
        ("cpu", 0.5, 500),  # unquoted YAML float: exact from the written decimal
        ("cpu", 0.1, 100),
        ("memory", 1.5e3, 1500 * 1000),
    ],
)
def test_parses_exactly(resource: str, text: object, milli: int) -> None:
    assert to_milli(resource, text) == milli


@pytest.mark.parametrize(
    "text", ["abc", "1Zi", "", "1.2.3", "Gi", "1 Gi", True, None, [1], float("nan"), float("inf")]
)
def test_rejects_what_is_not_a_quantity(text: object) -> None:
    with pytest.raises(QuantityError):
        to_milli("cpu", text)


def test_sums_stay_exact_where_floats_drift() -> None:
    tenth = to_milli("cpu", "100m")
    assert sum([tenth] * 10) == to_milli("cpu", "1")
    assert 0.1 * 3 != 0.3  # the float trap the integer representation avoids
    assert tenth * 3 == to_milli("cpu", "300m")


@pytest.mark.parametrize(
    ("resource", "milli", "text"),
    [
        ("cpu", 3000, "3"),
        ("cpu", 1500, "1500m"),
        ("memory", 3 * 200 * 2**20 * 1000, "600Mi"),
        ("memory", 36 * 2**30 * 1000, "36Gi"),
        ("memory", 1000 * 1000, "1000"),
        ("nvidia.com/gpu", 9000, "9"),
        ("example.com/foo", 2_000_000, "2k"),
        ("cpu", 0, "0"),
    ],
)
def test_formats_as_kueue_writes_resource_usage(resource: str, milli: int, text: str) -> None:
    assert format_milli(resource, milli) == text
