"""``kadmit run`` killed with SIGKILL at random moments and started again, while Jobs compete for two
ClusterQueues of one cohort and the API server answers 5 % of requests with 500/503/429, hangs 2 %,
answers 10 % of watches 410 and cuts every watch within 20 s. Every committed change is checked as
it is committed (tests/chaos/harness.py): the quota is never exceeded, no Job starts without an
admitted, non-evicted Workload; at the end every Job is complete and no quota is held."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.conftest import Chaos
from tests.chaos.harness import run_chaos


async def test_kills_and_api_faults_break_no_invariant(chaos: Chaos, tmp_path: Path) -> None:
    report = await run_chaos(chaos.world, tmp_path, jobs=24, kills=5, seed=5, kill_every=(1.5, 5.0),
                             settle_within=60)
    assert not report.exits, report.exits  # a fault is never a reason for kadmit run to exit
    assert not report.problems, report.problems
    assert report.kills == 5 and report.completed == 24
    assert report.job_starts >= 24  # every start was checked against its Workload
    faults = report.faults
    assert faults["failed"] and faults["gone"] and faults["hung"] and faults["cut"], faults
    assert max(report.peak_cpu.values()) > 0  # quota was held (and never beyond its limits)
