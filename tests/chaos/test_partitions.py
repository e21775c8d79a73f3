"""MultiKueue: the manager's link to a worker cut (connections reset, new ones unanswered) and healed
while Jobs run there, each partition shorter than the workers' lost timeout: no Job is started in
two clusters, none is lost."""

from __future__ import annotations

from tests.chaos.partitions import run_partitions
from tests.checks.multikueue_fixtures import multikueue_env


async def test_partitions_and_heals_neither_double_nor_lose_a_job() -> None:
    # Partitions of at most 3 s against a lost timeout well beyond them: on a loaded machine the
    # reconnection after a heal took long enough for an 8 s timeout to expire (then the Job may
    # rightly run elsewhere: Kueue's workerLostTimeout), which is not what this test is about.
    async with multikueue_env({"worker1": 4, "worker2": 4}, worker_lost_timeout=20.0) as env:
        report = await run_partitions(env, trials=4, seed=2, longest=3.0)
    assert report.twice == {} and report.lost == [], report
    assert report.completed == 4
