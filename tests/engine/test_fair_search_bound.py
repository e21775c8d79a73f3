"""A fair-sharing victim search skipped because it cannot succeed decides as when it is walked.

``_cannot_fit`` (``engine/fair_sharing.py``) bounds what the two strategies can free for the
preemptor (its own candidates, and per sibling queue what the queue borrows beyond the
preemptor's least share, plus one workload per strategy that compares initial shares) and skips
the search when even that cannot make it fit. On crowded cohort trees (two flavors, cpu and
memory, nested cohorts, borrowing and lending limits, weights including 0, some queues under
Admission Fair Sharing, usage above the cohort's quota) over cycles where time passes, victims
leave and workloads finish, every decision equals the one made with the search always walked.
"""

from __future__ import annotations

import copy
import random
from typing import Any
from unittest.mock import patch

import pytest

from kadmit.engine import Engine, fair_sharing
from kadmit.engine.admission_fair_sharing import AdmissionFairSharing
from kadmit.engine.fair_sharing import ACCEPTED_STRATEGIES
from tests.engine.conftest import (
    admitted_status,
    cluster_queue,
    cohort,
    flavor,
    local_queue,
    quotas,
    workload,
)

AFS = AdmissionFairSharing(usage_half_life=4.0, sampling_interval=1.0)


def _quota(rng: random.Random, nominal: int) -> tuple[int, int | None, int | None]:
    borrowing = rng.choice((None, None, 1, 3))
    lending = rng.choice((None, None, None, 0, 1))
    return nominal, borrowing, None if lending is None else min(lending, nominal)


def _crowded(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [flavor("f"), flavor("g")]
    root_cpu = rng.randint(0, 6)
    objects.append(
        cohort("root", groups=quotas({"f": {"cpu": root_cpu, "memory": 8}, "g": {"cpu": 2, "memory": 8}}))
    )
    homes = ["root"]
    for index in range(rng.randint(0, 2)):
        parent = rng.choice(homes)
        cpu = rng.randint(0, 2)
        objects.append(
            cohort(
                f"sub{index}",
                parent=parent,
                groups=quotas({"f": {"cpu": cpu, "memory": 4}, "g": {"cpu": 0, "memory": 0}}),
            )
        )
        homes.append(f"sub{index}")
    running = 0
    for q in range(rng.randint(3, 9)):
        name = f"cq{q}"
        spec: dict[str, Any] = {
            "preemption": {
                "withinClusterQueue": "LowerPriority",
                "reclaimWithinCohort": rng.choice(("Any", "Any", "LowerPriority")),
            },
        }
        if rng.random() < 0.5:
            spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
        if rng.random() < 0.4:
            spec["fairSharing"] = {"weight": rng.choice(("0", "1", "2", "0.5"))}
        groups = quotas(
            {
                "f": {
                    "cpu": _quota(rng, rng.choice((0, 1, 2))),
                    "memory": _quota(rng, rng.choice((0, 2, 4))),
                },
                "g": {"cpu": _quota(rng, rng.choice((0, 1))), "memory": _quota(rng, 2)},
            }
        )
        objects.append(cluster_queue(name, groups, cohort=rng.choice(homes), **spec))
        for lane in ("a", "b"):
            objects.append(local_queue(f"lq{q}{lane}", name))
            for _ in range(rng.randint(0, 5)):  # may hold more than the cohort has: hopeless searches
                running += 1
                on = rng.choice(("f", "f", "g"))
                cpu, memory = rng.choice((1, 1, 2)), rng.choice((0, 1))
                usage = {"cpu": str(cpu)} | ({"memory": str(memory)} if memory else {})
                flavors = {"cpu": on} | ({"memory": on} if memory else {})
                status = admitted_status(name, flavors, usage, at=float(rng.randint(0, 3)))
                requests = {"cpu": str(cpu)} | ({"memory": str(memory)} if memory else {})
                objects.append(
                    workload(
                        f"run{running}",
                        f"lq{q}{lane}",
                        priority=rng.choice((0, 1, 2)),
                        created=rng.randint(0, 3),
                        status=status,
                        **requests,
                    )
                )
            for p in range(rng.randint(0, 3)):
                requests = {"cpu": str(rng.randint(1, 4))}
                if rng.random() < 0.3:
                    requests["memory"] = str(rng.randint(1, 3))
                objects.append(
                    workload(
                        f"new{q}{lane}-{p}",
                        f"lq{q}{lane}",
                        priority=rng.choice((1, 2, 3)),
                        created=10 + rng.randint(0, 3),
                        **requests,
                    )
                )
    return objects


def _decide_all(
    objects: list[dict[str, Any]], seed: int, strategies: tuple[str, ...]
) -> list[tuple[Any, ...]]:
    """Eight cycles one virtual second apart, sampled each time; preempted workloads leave at
    once and some admitted ones finish: every decision."""
    engine = Engine(fair_sharing=True, preemption_strategies=strategies, admission_fair_sharing=AFS)
    for obj in objects:
        engine.upsert(obj)
    rng = random.Random(seed)
    log: list[tuple[Any, ...]] = []
    reserved: list[tuple[str, str]] = []
    for cycle in range(8):
        now = 1000.0 + cycle
        engine.sample_admission_fair_sharing(now)
        decisions = engine.schedule(now)
        log += [("reserve", r.workload, repr(r.admission)) for r in decisions.reservations]
        log += [("preempt", p.victim, p.preemptor, p.reason) for p in decisions.preemptions]
        log += [("pending", p.workload, p.reason, p.message) for p in decisions.pending]
        reserved += [r.workload for r in decisions.reservations]
        for preemption in decisions.preemptions:
            engine.release(*preemption.victim)
        for key in list(reserved):
            if rng.random() < 0.3 and engine.status(*key).state == "Admitted":
                engine.finish(*key)
                reserved.remove(key)
    return log


def _never(*_: object) -> bool:
    """Never skip the search (the shortcut off)."""
    return False


@pytest.mark.parametrize("strategies", ACCEPTED_STRATEGIES, ids=lambda s: "+".join(s))
@pytest.mark.parametrize("seed", range(100))
def test_a_search_skipped_as_hopeless_decides_as_when_walked(seed: int, strategies: tuple[str, ...]) -> None:
    objects = _crowded(seed)
    skipped = _decide_all(copy.deepcopy(objects), seed, strategies)
    with patch("kadmit.engine.fair_sharing._cannot_fit", _never):
        walked = _decide_all(copy.deepcopy(objects), seed, strategies)
    assert skipped == walked


def test_the_bound_skips_searches_that_would_walk() -> None:
    """The inputs above reach the shortcut, and it skips searches that would otherwise have
    walked the strategies (taken victims, then failed)."""
    taken = 0
    real = fair_sharing._cannot_fit

    def counting(*args: Any) -> bool:
        nonlocal taken
        result = real(*args)
        taken += result
        return result

    with patch("kadmit.engine.fair_sharing._cannot_fit", counting):
        for seed in range(30):
            _decide_all(_crowded(seed), seed, ACCEPTED_STRATEGIES[2])
    assert taken > 20
