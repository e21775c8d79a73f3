"""bench/status_writes.py at a small size: the costs it prints stay within the target (at most 3
Workload writes on the way to admission, none while nothing changes)."""

from __future__ import annotations

import re

import pytest

from tests.bench.conftest import load_script


async def test_a_small_burst_stays_within_three_writes_and_none_when_quiet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_script("status_writes").main(200, 1.0)
    out = capsys.readouterr().out
    mean, most = re.search(r"per Workload: mean ([\d.]+), max (\d+)", out).groups()  # type: ignore[union-attr]
    assert 1.0 <= float(mean) <= 3.0 and int(most) <= 3, out
    left, told, quiet = re.search(
        r"then (\d+) left waiting \((\d+) told WaitingForQuota\): (\d+) Workload writes", out
    ).groups()  # type: ignore[union-attr]
    assert int(left) > 0 and told == left and quiet == "0", out
