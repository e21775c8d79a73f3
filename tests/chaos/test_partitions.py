"""MultiKueue: the manager's link to a worker cut (connections reset, new ones unanswered) and healed
while Jobs run there, each partition shorter than the workers' lost timeout: no Job is started in
two clusters, none is lost."""

from __future__ import annotations

from tests.chaos.partitions import run_partitions
from tests.checks.multikueue_fixtures import multikueue_env


async def test_partitions_and_heals_neither_double_nor_lose_a_job() -> None:
    async with multikueue_env({"worker1": 4, "worker2": 4}, worker_lost_timeout=8.0) as env:
        report = await run_partitions(env, trials=4, seed=2, longest=3.0)
    assert report.twice == {} and report.lost == [], report
    assert report.completed == 4
