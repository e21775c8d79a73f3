"""Fair-sharing victim searches skipped or shared decide as when each is walked.

``_cannot_fit`` (``engine/fair_sharing.py``) bounds what the two strategies can free for the
preemptor (its own candidates, and per sibling queue what the queue borrows beyond the
preemptor's least share, plus one workload per strategy that compares initial shares) and skips
the search when even that cannot make it fit. On crowded cohort trees (two flavors, cpu and
memory, nested cohorts, borrowing and lending limits, weights including 0, some queues under
Admission Fair Sharing, usage above the cohort's quota) over cycles where time passes, victims
leave and workloads finish, every decision equals the one made with the search always walked.

Searches in one state of a tree whose preemptors' own queues give no candidate and borrow
nothing needed, alike in parent, usage, quotas, weight and policy, with the same priority and
request, share one result (``fair_targets``' ``memo``): on cohorts of alike queues, every decision
equals the one made with each search walked.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any
from unittest.mock import patch

import pytest

from kadmit.engine import Engine, fair_sharing
from kadmit.engine.admission_fair_sharing import AdmissionFairSharing
from kadmit.engine.fair_sharing import ACCEPTED_STRATEGIES, Shares
from kadmit.engine.model import LOWER_PRIORITY, ClusterQueue, FlavorResource, PreemptionPolicy
from kadmit.engine.preemption import Preemptor, Target
from kadmit.engine.quota import QuotaNode, add_usage, compute_quotas
from tests.engine.conftest import (
    admitted_status,
    cluster_queue,
    cohort,
    flavor,
    interpreted_only,
    leave_and_finish,
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
        leave_and_finish(engine, decisions, reserved, rng)
    return log


def _never(*_: object) -> bool:
    """Never skip the search (the shortcut off)."""
    return False


@interpreted_only
@pytest.mark.parametrize("strategies", ACCEPTED_STRATEGIES, ids=lambda s: "+".join(s))
@pytest.mark.parametrize("seed", range(100))
def test_a_search_skipped_as_hopeless_decides_as_when_walked(seed: int, strategies: tuple[str, ...]) -> None:
    objects = _crowded(seed)
    skipped = _decide_all(copy.deepcopy(objects), seed, strategies)
    with patch("kadmit.engine.fair_sharing._cannot_fit", _never):
        walked = _decide_all(copy.deepcopy(objects), seed, strategies)
    assert skipped == walked


@interpreted_only
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


def _alike(seed: int) -> list[dict[str, Any]]:
    """Cohorts of alike ClusterQueues (same quotas, policy, and mostly weight): some borrow (with
    low-priority workloads, or only workloads their own heads may not take), the others are full
    at their nominal quota with workloads their heads may not take, and their heads (alike in
    priority and request, mostly) must preempt in the borrowers."""
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [flavor("f")]
    for c in range(rng.randint(1, 2)):
        root = f"co{c}"
        objects.append(cohort(root, groups=quotas({"f": {"cpu": rng.randint(0, 2), "memory": 4}})))
        parents = [root]
        if rng.random() < 0.5:
            objects.append(cohort(f"{root}-sub", parent=root, groups=quotas({"f": {"cpu": 1, "memory": 0}})))
            parents.append(f"{root}-sub")
        reclaim = rng.choice(("Any", "LowerPriority"))
        for q in range(rng.randint(4, 10)):
            name = f"{root}-cq{q}"
            spec: dict[str, Any] = {
                "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": reclaim},
            }
            if rng.random() < 0.5:
                spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
            if rng.random() < 0.2:
                spec["fairSharing"] = {"weight": rng.choice(("0", "2"))}
            groups = quotas({"f": {"cpu": (2, rng.choice((None, 4))), "memory": 4}})
            objects.append(cluster_queue(name, groups, cohort=rng.choice(parents), **spec))
            borrower = rng.random() < 0.5
            # a borrower with only high-priority workloads gives its own heads no candidate
            high = borrower and rng.random() < 0.4
            for lane in ("a", "b"):
                lq = f"lq-{name}-{lane}"
                objects.append(local_queue(lq, name))
                count = rng.randint(1, 3) if borrower else 1
                for i in range(count):
                    priority = 5 if high or not borrower else rng.choice((0, 1, 2))
                    status = admitted_status(name, {"cpu": "f"}, {"cpu": "1"}, at=float(rng.randint(0, 3)))
                    objects.append(
                        workload(f"run-{name}-{lane}{i}", lq, priority=priority, created=i, status=status)
                    )
                for p in range(rng.randint(0, 2)):
                    objects.append(
                        workload(
                            f"new-{name}-{lane}{p}",
                            lq,
                            priority=rng.choice((2, 3, 3)),
                            created=10 + rng.randint(0, 3),
                            cpu=str(rng.choice((1, 1, 2))),
                        )
                    )
    return objects


def _unshared(*_: object) -> bool:
    """Every preemptor's queue counts as borrowing: no search result is shared."""
    return True


@interpreted_only
@pytest.mark.parametrize("seed", range(100))
def test_searches_shared_by_alike_queues_decide_as_when_each_is_walked(seed: int) -> None:
    objects = _alike(seed)
    strategies = ACCEPTED_STRATEGIES[seed % len(ACCEPTED_STRATEGIES)]
    shared = _decide_all(copy.deepcopy(objects), seed, strategies)
    with patch("kadmit.engine.fair_sharing._borrows_any", _unshared):
        walked = _decide_all(copy.deepcopy(objects), seed, strategies)
    assert shared == walked


@interpreted_only
def test_alike_queues_share_searches() -> None:
    """The inputs above share search results, victims found and none found alike."""
    shared: list[bool] = []
    memos: list[dict[Hashable, Any]] = []
    real_targets = fair_sharing.fair_targets
    real_key = fair_sharing._search_key

    def tracking(*args: Any) -> list[Any]:
        memos.append(args[6])  # the memo the cycle passes
        return real_targets(*args)

    def keyed(*args: Any) -> Hashable:
        key = real_key(*args)
        if key in memos[-1]:
            shared.append(bool(memos[-1][key]))
        return key

    with (
        patch("kadmit.engine.cycle.fair_targets", tracking),
        patch("kadmit.engine.fair_sharing._search_key", keyed),
    ):
        for seed in range(40):
            _decide_all(_alike(seed), seed, ACCEPTED_STRATEGIES[2])
    assert True in shared and False in shared, shared


@dataclass(frozen=True)
class _Running:
    """A workload holding quota, as a victim search sees it."""

    name: str
    reserved_in: str
    priority: int
    charged: Mapping[FlavorResource, int]
    timestamp: float = 0.0
    reserved_at: float = 0.0
    evicted: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return ("default", self.name)

    @property
    def uid(self) -> str:
        return self.name


def test_a_shared_search_is_one_of_a_preemptor_with_the_same_priority() -> None:
    """Queues ``a`` and ``b`` alike (full at nominal, nothing of their own to take), ``c``
    borrowing with priority-2 workloads, ``reclaimWithinCohort: LowerPriority``: a priority-3
    head of ``a`` takes one of ``c``'s, a priority-2 head of ``b`` may take none. The search of
    ``b``'s head in the same state does not get ``a``'s victims, and each equals the search
    made without sharing."""
    cpu: FlavorResource = ("f", "cpu")
    root = QuotaNode("root", True)
    root.nominal[cpu] = 2
    nodes: dict[str, QuotaNode] = {}
    for name, nominal in (("a", 1), ("b", 1), ("c", 0)):
        node = nodes[name] = QuotaNode(name, False, parent=root)
        node.nominal[cpu] = nominal
        root.children.append(node)
    compute_quotas(root)
    running = [
        _Running("a-0", "a", 5, {cpu: 1}),
        _Running("b-0", "b", 5, {cpu: 1}),
        _Running("c-0", "c", 2, {cpu: 1}, reserved_at=1.0),
        _Running("c-1", "c", 2, {cpu: 1}),
    ]
    for wl in running:
        add_usage(nodes[wl.reserved_in], wl.charged)
    policy = PreemptionPolicy(reclaim_within_cohort=LOWER_PRIORITY, within_cluster_queue=LOWER_PRIORITY)
    queues = {name: ClusterQueue(name, cohort="root", preemption=policy) for name in nodes}
    holders = [(nodes[n], queues[n], [wl for wl in running if wl.reserved_in == n]) for n in ("a", "b", "c")]
    shares = Shares(lambda node: Fraction(1))

    def search(name: str, priority: int, memo: dict[Hashable, list[Target]] | None) -> list[str]:
        preemptor = Preemptor(queues[name], nodes[name], priority, 10.0, {cpu: 1})
        found = fair_sharing.fair_targets(preemptor, [cpu], holders, shares, memo=memo, state="now")
        return [target.workload.key[1] for target in found]

    assert search("a", 3, None) == ["c-0"]
    assert search("b", 2, None) == []
    memo: dict[Hashable, list[Target]] = {}
    assert search("a", 3, memo) == ["c-0"]
    assert memo  # kept for another alike preemptor
    assert search("b", 3, memo) == ["c-0"]  # alike: shared
    assert search("b", 2, memo) == []  # another priority: its own search
