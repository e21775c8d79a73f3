"""bench/multikueue.py at a small size: every Job's Workload is Admitted on the manager after
running on one worker, and the CPU of each of the five processes is printed per Workload."""

from __future__ import annotations

import re

import pytest

from tests.bench.conftest import load_script
from tests.kadmit_local import ENGINE_BUILD


@pytest.mark.timeout(600)  # four API servers and kadmit local start first; the machine is shared
async def test_a_few_jobs_are_admitted_through_the_workers_and_each_process_cpu_is_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_script("multikueue").measure(3, 6, 3, False)
    out = capsys.readouterr().out
    assert f"kadmit's engine: {ENGINE_BUILD}" in out, out
    assert re.search(r"all 6 Workloads Admitted on the manager after [\d.]+ s", out), out
    spread = re.search(r"where they run: (\{.*\})", out)
    assert spread is not None, out
    ran = {name: int(n) for name, n in re.findall(r"'(worker\d)': (\d+)", spread.group(1))}
    assert sum(ran.values()) == 6 and set(ran) <= {"worker1", "worker2", "worker3"}, out
    rows = dict(re.findall(r"^ {4}(\S.*?\S)\s+[\d.]+ \(\s*\d+%\)\s+([\d.]+) ms$", out, re.M))
    expected = {
        "kadmit local (kadmit on the manager and on each worker)",
        "manager's API server + simulated cluster",
        *(f"worker{i}'s API server + simulated cluster" for i in (1, 2, 3)),
        "all 5 processes",
    }
    assert set(rows) == expected, out
    assert (
        float(rows["all 5 processes"])
        >= float(rows["kadmit local (kadmit on the manager and on each worker)"])
        > 0
    )


def test_an_empty_kadmit_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        load_script("multikueue").main(["--kadmit-command", " "])
    assert exit_info.value.code == 2
    assert "--kadmit-command must name a command" in capsys.readouterr().err
