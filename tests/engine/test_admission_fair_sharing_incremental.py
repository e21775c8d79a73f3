"""Victim searches with Admission Fair Sharing decide as when everything is recomputed.

A victim search takes candidates off the quota tree and puts them back; the nodes' marks
(``stamp``, ``version``) are then set back too, so that the shares and the tournament's winners
derived before the search stay valid after it. Admission Fair Sharing's candidates are ordered
by a key within each ClusterQueue (:func:`afs_order`), and a ClusterQueue's share after one
removal is computed without changing its usage. On crowded cohorts with two LocalQueues per ClusterQueue, over
cycles where time passes, usage is sampled, victims leave and workloads finish, every decision
equals the one made with none of this kept: marks never set back, every share computed afresh,
the reference tournament and target ordering, removals applied to the tree, and the candidate
order built from Kueue's comparator (:func:`reference_afs_order`).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from typing import Any
from unittest.mock import patch

import pytest

from kadmit.engine import Engine
from kadmit.engine.admission_fair_sharing import AdmissionFairSharing
from kadmit.engine.fair_sharing import (
    Rank,
    Share,
    Shares,
    Terms,
    _rank,
    _share_terms,
    dominant_resource_share,
)
from kadmit.engine.model import FlavorResource
from kadmit.engine.quota import Marks, QuotaNode, add_usage
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
from tests.engine.test_afs_candidate_order import reference_afs_order
from tests.engine.test_fair_sharing_incremental import _ReferenceOrdering, _ReferenceTournament, _walk_always

AFS = AdmissionFairSharing(usage_half_life=4.0, sampling_interval=1.0)


def _crowded(seed: int) -> list[dict[str, Any]]:
    """A cohort tree of borrowing ClusterQueues under Admission Fair Sharing, each with two
    LocalQueues holding running workloads of mixed priorities, and heads that must preempt."""
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [
        flavor("f"),
        cohort("root", groups=quotas({"f": {"cpu": rng.randint(6, 12)}})),
    ]
    homes = ["root"]
    for index in range(rng.randint(0, 2)):
        parent = rng.choice(homes)
        objects.append(cohort(f"sub{index}", parent=parent, groups=quotas({"f": {"cpu": rng.randint(0, 2)}})))
        homes.append(f"sub{index}")
    running = 0
    for q in range(rng.randint(3, 8)):
        name = f"cq{q}"
        objects.append(
            cluster_queue(
                name,
                quotas({"f": {"cpu": rng.choice((0, 1, 2))}}),
                cohort=rng.choice(homes),
                preemption={
                    "withinClusterQueue": "LowerPriority",
                    "reclaimWithinCohort": rng.choice(("Any", "Any", "LowerPriority")),
                },
                admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"},
            )
        )
        for lane in ("a", "b"):
            objects.append(local_queue(f"lq{q}{lane}", name))
            for _ in range(rng.randint(0, 4)):
                running += 1
                status = admitted_status(name, {"cpu": "f"}, {"cpu": "1"}, at=float(rng.randint(0, 3)))
                objects.append(
                    workload(
                        f"run{running}",
                        f"lq{q}{lane}",
                        priority=rng.choice((0, 1, 2)),
                        created=rng.randint(0, 3),
                        status=status,
                    )
                )
            for p in range(rng.randint(0, 3)):
                objects.append(
                    workload(
                        f"new{q}{lane}-{p}",
                        f"lq{q}{lane}",
                        priority=rng.choice((1, 2, 3)),
                        created=10 + rng.randint(0, 3),
                        cpu=str(rng.randint(1, 3)),
                    )
                )
    return objects


def _decide_all(objects: list[dict[str, Any]], fair: bool, seed: int) -> list[tuple[Any, ...]]:
    """Ten cycles one virtual second apart, sampled each time; preempted workloads leave at
    once and some admitted ones finish: every decision."""
    engine = Engine(fair_sharing=fair, admission_fair_sharing=AFS)
    for obj in objects:
        engine.upsert(obj)
    rng = random.Random(seed)
    log: list[tuple[Any, ...]] = []
    reserved: list[tuple[str, str]] = []
    for cycle in range(10):
        now = 1000.0 + cycle
        engine.sample_admission_fair_sharing(now)
        decisions = engine.schedule(now)
        log += [("reserve", r.workload, repr(r.admission)) for r in decisions.reservations]
        log += [("preempt", p.victim, p.preemptor, p.reason) for p in decisions.preemptions]
        log += [("pending", p.workload, p.reason) for p in decisions.pending]
        leave_and_finish(engine, decisions, reserved, rng)
    return log


def _fresh_share(self: Shares, node: QuotaNode) -> Share:
    return dominant_resource_share(node, self.weight_of(node))


def _fresh_rank(self: Shares, node: QuotaNode) -> Rank:
    return _rank(_share_terms(node, self.weight_of(node), None, None))


def _applied_rank(self: Shares, node: QuotaNode, extra: Mapping[FlavorResource, int]) -> Rank:
    """The share with ``extra`` added to the tree (as the search did before), computed afresh."""
    add_usage(node, extra)
    try:
        terms: Terms = _share_terms(node, self.weight_of(node), None, None)
    finally:
        add_usage(node, extra, -1)
    return _rank(terms)


def _never_restored(marks: Marks) -> None:
    pass


@interpreted_only
@pytest.mark.parametrize("fair", [True, False], ids=["fair-sharing", "classical"])
@pytest.mark.parametrize("seed", range(60))
def test_admission_fair_sharing_searches_decide_as_when_recomputed(seed: int, fair: bool) -> None:
    objects = _crowded(seed)
    kept = _decide_all(copy.deepcopy(objects), fair, seed)
    with (
        patch("kadmit.engine.cycle.Tournament", _ReferenceTournament),
        patch("kadmit.engine.fair_sharing._TargetOrdering", _ReferenceOrdering),
        patch("kadmit.engine.fair_sharing._none_pass", _walk_always),
        patch("kadmit.engine.fair_sharing.Shares.rank", _fresh_rank),
        patch("kadmit.engine.fair_sharing.Shares.of", _fresh_share),
        patch("kadmit.engine.fair_sharing.Shares.rank_with_usage", _applied_rank),
        patch("kadmit.engine.fair_sharing.afs_order", reference_afs_order),
        patch("kadmit.engine.preemption.afs_order", reference_afs_order),
        patch("kadmit.engine.fair_sharing.restore_marks", _never_restored),
        patch("kadmit.engine.preemption.restore_marks", _never_restored),
    ):
        recomputed = _decide_all(copy.deepcopy(objects), fair, seed)
    assert kept == recomputed
