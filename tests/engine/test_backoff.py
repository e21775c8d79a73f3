"""Requeue backoff (contract §5.7: min(base * 2^(n-1), max); §3: Retry checks' requeueAfterSeconds)."""

from __future__ import annotations

import pytest

from kadmit.engine.backoff import backoff_seconds, check_retry_requeue_at, pods_ready_requeue_at


@pytest.mark.parametrize(
    ("count", "expected"),
    [(1, 60), (2, 120), (3, 240), (6, 1920), (7, 3600), (200, 3600)],
)
def test_pods_ready_backoff_defaults(count: int, expected: int) -> None:
    assert backoff_seconds(count) == expected
    assert pods_ready_requeue_at(1000.0, count) == 1000.0 + expected


def test_custom_base_and_cap_and_zero_base() -> None:
    assert backoff_seconds(3, base=10, maximum=30) == 30
    assert backoff_seconds(5, base=0, maximum=1800) == 0


def test_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        backoff_seconds(0)


@pytest.mark.parametrize(
    ("previous", "retries", "expected"),
    [
        (None, [(100.0, 30), (110.0, 10)], 130.0),
        (None, [(100.0, None)], None),  # retry at once
        (500.0, [(100.0, 30)], 500.0),  # never moved earlier
        (50.0, [(100.0, 30)], 130.0),
    ],
)
def test_check_retry_requeue_at(
    previous: float | None, retries: list[tuple[float, int | None]], expected: float | None
) -> None:
    assert check_retry_requeue_at(previous, retries) == expected
