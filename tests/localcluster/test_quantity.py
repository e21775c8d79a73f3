"""Quantities: apimachinery's grammar and limits, and a parse that stays cheap whatever the text.

``Fraction(10) ** exponent`` made ``1e10000000`` take about 20 s and ``1e1000000000`` hours, in the
quota check of every pod create and in the simulated scheduler; these tests would hang on that.
"""

from __future__ import annotations

import json
import time
from fractions import Fraction

import pytest
from aiohttp import ClientSession

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    FORMAT_WRONG,
    NUMERIC,
    SUFFIX,
    TOO_LARGE,
    Quantity,
    QuantityError,
    parse_quantity,
)

NANO = Fraction(1, 10**9)
# Far below what the old parser took on the first two of these; generous for a slow CI machine.
QUICK_SECONDS = 0.5


@pytest.mark.parametrize(
    ("text", "value", "fmt"),
    [
        ("500m", Fraction(1, 2), DECIMAL_SI),
        ("1Gi", Fraction(2**30), BINARY_SI),
        ("0.5Ki", Fraction(512), BINARY_SI),
        ("1e3", Fraction(1000), DECIMAL_EXPONENT),
        ("1E3", Fraction(1000), DECIMAL_EXPONENT),
        ("1E", Fraction(10**18), DECIMAL_SI),  # the exa suffix, not an exponent
        ("1e+03", Fraction(1000), DECIMAL_EXPONENT),
        ("1.", Fraction(1), DECIMAL_SI),
        (" .5 ", Fraction(1, 2), DECIMAL_SI),
        ("-1.5k", Fraction(-1500), DECIMAL_SI),
        ("9223372036854775807", Fraction(2**63 - 1), DECIMAL_SI),
        ("7Ei", Fraction(7 * 2**60), BINARY_SI),
        ("0.0001Ki", Fraction(1024, 10**4), DECIMAL_SI),  # below one, a BinarySI amount prints as decimal
        (2, Fraction(2), DECIMAL_SI),
        (0.25, Fraction(1, 4), DECIMAL_SI),
    ],
)
def test_quantities_parse_as_apimachinery_reads_them(text: object, value: Fraction, fmt: str) -> None:
    assert Quantity.parse(text) == Quantity(value, fmt)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.1n", NANO),
        ("2e-10", NANO),
        ("1.0000000001", 1 + NANO),
        ("-1e-2147483647", -NANO),  # the smallest exponent that fits an int32, rounded away from zero
        ("0e-2147483647", Fraction(0)),
        ("0." + "0" * 100_000 + "1", NANO),
    ],
)
def test_finer_than_a_nano_rounds_up_to_the_next_nano(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1e10000000", TOO_LARGE),
        ("1e1000000000", TOO_LARGE),
        ("1e2147483647", TOO_LARGE),
        ("1e2147483648", SUFFIX),  # the exponent no longer fits an int32
        ("1e99999999999999999999", SUFFIX),
        ("9223372036854775808", TOO_LARGE),
        ("9223372036854775807.000000001", TOO_LARGE),
        ("8Ei", TOO_LARGE),
        ("1" + "0" * 100_000, TOO_LARGE),
        (10**100, TOO_LARGE),
        (1e300, TOO_LARGE),
        ("1" * 100_000 + "x", FORMAT_WRONG),
        ("1.5.1", FORMAT_WRONG),
        ("", FORMAT_WRONG),
        ("1K", SUFFIX),
        ("1e", SUFFIX),
        (".", NUMERIC),
        (float("inf"), FORMAT_WRONG),
        (True, FORMAT_WRONG),
    ],
)
def test_beyond_the_limits_is_a_clear_error_at_once(text: object, reason: str) -> None:
    started = time.perf_counter()
    with pytest.raises(QuantityError) as caught:
        Quantity.parse(text)
    assert caught.value.reason == reason
    assert time.perf_counter() - started < QUICK_SECONDS


@pytest.mark.timeout(30)
async def test_the_api_server_refuses_a_huge_quantity_at_once() -> None:
    """A pod or a quota with one is a 400 from decoding, before quota admission or a controller
    ever does arithmetic with it."""
    async with LocalCluster() as cluster, ClientSession(cluster.url) as http:
        quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                 "spec": {"hard": {"requests.cpu": "10"}}}
        created = await http.post("/api/v1/namespaces/default/resourcequotas", json=quota)
        assert created.status == 201
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "busybox",
                                        "resources": {"requests": {"cpu": "1e1000000000"}}}]}}
        huge_quota = {**quota, "metadata": {"name": "huge"}, "spec": {"hard": {"cpu": "1e10000000"}}}
        for path, body in (("pods", pod), ("resourcequotas", huge_quota)):
            started = time.perf_counter()
            response = await http.post(f"/api/v1/namespaces/default/{path}", json=body)
            status = json.loads(await response.read())
            assert response.status == 400 and status["reason"] == "BadRequest", status
            assert status["message"].endswith(TOO_LARGE), status
            assert time.perf_counter() - started < QUICK_SECONDS * 4
        assert cluster.store.get("", "pods", "default", "p") is None
