"""Kubernetes quantities: exact parsing into milli-units and Kueue's canonical printing."""

from __future__ import annotations

import re
import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kadmit.engine import parse
from kadmit.engine.errors import InvalidObject
from kadmit.engine.quantity import (
    MAX_QUANTITY,
    QuantityError,
    format_milli,
    parse_exact,
    to_milli,
    to_nano,
)
from tests.engine.conftest import cluster_queue, quotas, workload


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


# -- exactness against a plain Fraction reference ------------------------------------------------

_MULTIPLIER = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    **{s: Fraction(2 ** (10 * (i + 1))) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
}


def short_id(value: object) -> str:
    """Test ids for values that may be a megabyte long (or an int too long to print)."""
    if isinstance(value, int):
        return f"int-{value.bit_length()}-bits"
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}...{len(text)}-chars"


def reference_exact(number: str, suffix: str) -> Fraction:
    """The value, computed the slow obvious way (fine for the small exponents drawn here)."""
    return Fraction(number) * (_MULTIPLIER.get(suffix) or Fraction(10) ** int(suffix[1:]))


def reference_nanos(number: str, suffix: str) -> int:
    """What ParseQuantity holds: the exact value rounded up, away from zero, to the nano."""
    exact = reference_exact(number, suffix)
    scaled = exact * 10**9
    away = -((-abs(scaled.numerator)) // scaled.denominator)
    return -away if exact < 0 else away


numbers = st.builds(
    lambda sign, whole, fraction: f"{sign}{whole}{fraction}",
    st.sampled_from(["", "+", "-"]),
    st.text("0123456789", min_size=1, max_size=30),
    st.one_of(st.just(""), st.text("0123456789", max_size=40).map(lambda f: "." + f)),
)
suffixes = st.one_of(
    st.sampled_from(sorted(_MULTIPLIER)),
    st.integers(-80, 30).map(lambda e: f"e{e}"),
    st.integers(0, 30).map(lambda e: f"E+{e:03d}"),
)


@settings(max_examples=1000, deadline=None)
@given(numbers, suffixes)
def test_in_range_values_are_exact_to_the_nano(number: str, suffix: str) -> None:
    expected = reference_nanos(number, suffix)
    if abs(reference_exact(number, suffix)) > MAX_QUANTITY:
        with pytest.raises(QuantityError, match="out of range"):
            to_nano(number + suffix)
    else:
        assert to_nano(number + suffix) == expected


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("1e-20", 1),  # finer than a nano: rounded up, as ParseQuantity does
        ("-1e-20", -1),  # away from zero
        ("0.0000000001Ki", 103),  # 1.024e-7 -> 103n: the binary suffix applies before rounding
        ("1e-2147483648", 1),  # the smallest exponent: still a non-zero amount
        ("0." + "0" * 100_000 + "1", 1),
        ("0" * 100_000 + "5", 5 * 10**9),
        ("5" + "0" * 100_000 + "e-100000", 5 * 10**9),
        ("1e" + "0" * 100_000 + "3", 1000 * 10**9),
        ("1." + "0" * 100_000, 10**9),
        ("9223372036854775807", MAX_QUANTITY * 10**9),
        ("-9223372036854775807", -MAX_QUANTITY * 10**9),
        ("8191Pi", (8191 << 50) * 10**9),  # just below 2^63
        ("0", 0),
        ("-0.0e999", 0),
    ],
    ids=short_id,
)
def test_edges(text: str, nanos: int) -> None:
    assert to_nano(text) == nanos


def test_sub_nano_precision_never_changes_milli_or_whole_units() -> None:
    assert to_milli("cpu", "1.0000000000001m") == 2
    assert to_milli("memory", "1.0000000000001") == 2000
    assert parse_exact("1e-20") == Fraction(1, 10**9)


# -- limits: a clear error naming the value, in bounded time --------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("9223372036854775808", "'9223372036854775808' is out of range: a quantity may be at most 2^63-1"),
        ("8Ei", "'8Ei' is out of range"),  # 2^63: Go caps binary values here; we refuse
        ("1e19", "'1e19' is out of range"),
        ("1e10000000", "'1e10000000' is out of range"),
        ("1e1000000000", "'1e1000000000' is out of range"),
        ("1e2147483647", "'1e2147483647' is out of range"),
        ("1e2147483648", "'1e2147483648' is out of range: the exponent must fit in 32 bits"),
        ("1e-2147483649", "the exponent must fit in 32 bits"),
        ("1e99999999999999999999999999", "the exponent must fit in 32 bits"),
        ("1e" + "9" * 1_000_000, "the exponent must fit in 32 bits"),
        ("9" * 1_000_000, "'99999999999999999999999999999999'... (1000000 characters) is out of range"),
        ("9" * 1_000_000 + "x", "(1000001 characters) is not a quantity"),
        (2**63, "an integer of 64 bits is out of range"),
        (10**100_000, "an integer of 332193 bits is out of range"),
        (1e300, "'1e+300' is out of range"),
    ],
    ids=short_id,
)
@pytest.mark.timeout(5)
def test_beyond_the_limits_is_a_clear_error_at_once(value: object, message: str) -> None:
    start = time.process_time()
    with pytest.raises(QuantityError, match=re.escape(message)):
        to_milli("cpu", value)
    assert time.process_time() - start < 0.5


@pytest.mark.timeout(10)
def test_worst_cases_parse_in_linear_time() -> None:
    """Each of these took seconds to hours through Fraction(10) ** exponent or int() of all digits."""
    worst = [
        "1e-10000000",
        "1e-1000000000",
        "0." + "0" * 2_000_000 + "1",
        "1" + "0" * 2_000_000 + "e-2000000",
        "0." + "1" * 2_000_000,
        "0." + "7" * 2_000_000 + "Ei",
    ]
    for text in worst:
        start = time.process_time()
        to_milli("memory", text)
        assert time.process_time() - start < 0.5, text[:40]


@pytest.mark.timeout(5)
def test_a_tenant_cannot_stall_parsing_with_a_huge_exponent() -> None:
    """The issue's case: ``cpu: "1e10000000"`` blocked the event loop for ~20 s."""
    queue = cluster_queue("cq", quotas({"f": {"cpu": "1e10000000"}}))
    with pytest.raises(InvalidObject, match=r"nominalQuota.*'1e10000000' is out of range"):
        parse.cluster_queue(queue)
    request = workload("w", cpu="1e-1000000000")  # tiny: one nano, so one milli-CPU
    assert parse.workload(request).pod_sets[0].requests == {"cpu": 1}
