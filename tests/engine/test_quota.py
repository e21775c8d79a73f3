"""Borrowing and lending through the cohort tree (contract §5.2, Kueue's cluster_queue.md checks)."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.engine import InvalidObject
from tests.engine.conftest import (
    T0,
    admitted_names,
    cluster_queue,
    cohort,
    flavor,
    load,
    local_queue,
    quotas,
    workload,
)


def _two_queues(a: Any, b: Any) -> list[dict[str, Any]]:
    return [
        flavor("f"),
        cluster_queue("a", quotas({"f": {"cpu": a}}), cohort="team"),
        cluster_queue("b", quotas({"f": {"cpu": b}}), cohort="team"),
        local_queue("lq-a", "a"),
        local_queue("lq-b", "b"),
    ]


def _max_admitted(objects: list[dict[str, Any]], queue: str) -> int:
    """How many 1-cpu workloads ``queue`` gets when it is alone in asking."""
    engine = load(*objects)
    for i in range(40):
        engine.upsert_workload(workload(f"w{i}", queue, created=i))
    return len(admitted_names(engine.schedule(T0)))


@pytest.mark.parametrize(
    ("a", "b", "queue", "expected"),
    [
        (9, 12, "lq-a", 21),  # no limits: each can use the whole cohort
        (9, 12, "lq-b", 21),
        ((9, 1), 12, "lq-a", 10),  # borrowingLimit 1 on A
        (9, (12, None, 1), "lq-a", 10),  # lendingLimit 1 on B: A gets 9 + 1
        (9, (12, None, 1), "lq-b", 21),
    ],
)
def test_documented_borrowing_examples(a: Any, b: Any, queue: str, expected: int) -> None:
    assert _max_admitted(_two_queues(a, b), queue) == expected


def test_lending_limit_keeps_the_rest_for_the_lender() -> None:
    engine = load(*_two_queues(9, (12, None, 1)))
    for i in range(12):
        engine.upsert_workload(workload(f"a{i}", "lq-a", created=i))
    assert len(admitted_names(engine.schedule(T0))) == 10
    for i in range(12):
        engine.upsert_workload(workload(f"b{i}", "lq-b", created=100 + i))
    assert len(admitted_names(engine.schedule(T0 + 1))) == 11  # B always keeps 11


def test_hierarchical_cohort_adds_its_own_quota_and_limits() -> None:
    objects = [
        flavor("f"),
        cohort("root", groups=quotas({"f": {"cpu": 4}})),
        cohort("child", parent="root", groups=quotas({"f": {"cpu": (2, 3)}})),
        cluster_queue("a", quotas({"f": {"cpu": 1}}), cohort="child"),
        local_queue("lq-a", "a"),
    ]
    # a: 1 own + 2 from child + at most 3 borrowed by child from root (root has 4) = 6.
    assert _max_admitted(objects, "lq-a") == 6


def test_cq_can_borrow_only_what_it_lists() -> None:
    engine = load(
        flavor("f"),
        cluster_queue("a", quotas({"f": {"cpu": 4}}), cohort="team"),
        cluster_queue("b", quotas({"f": {"cpu": 4, "memory": "4Gi"}}), cohort="team"),
        local_queue("lq-a", "a"),
    )
    engine.upsert_workload(workload("w", "lq-a", cpu="1", memory="1Gi"))
    decisions = engine.schedule(T0)
    assert decisions.pending[0].reason == "NoMatchingFlavor"
    assert "resource memory unavailable in ClusterQueue" in decisions.pending[0].message


def test_usage_bubbles_only_above_local_quota() -> None:
    engine = load(*_two_queues((4, None, 1), 4))
    for i in range(4):
        engine.upsert_workload(workload(f"w{i}", "lq-a", created=i))
    engine.schedule(T0)
    assert engine.usage("a") == {("f", "cpu"): 4000}
    # local quota of a is 3 (4 - lendingLimit 1): only 1 cpu reaches the cohort.
    assert engine.usage("team") == {("f", "cpu"): 1000}


@pytest.mark.parametrize(
    ("queue", "expected"),
    [
        ("lq-b", 2),  # the left cohort lends at most 2 of a's 6 to the rest of the tree
        ("lq-a", 6),
    ],
)
def test_cohort_lending_limit(queue: str, expected: int) -> None:
    objects = [
        flavor("f"),
        cohort("root"),
        cohort("left", parent="root", groups=quotas({"f": {"cpu": (0, None, 2)}})),
        cluster_queue("a", quotas({"f": {"cpu": 6}}), cohort="left"),
        cluster_queue("b", quotas({"f": {"cpu": 0}}), cohort="root"),
        local_queue("lq-a", "a"),
        local_queue("lq-b", "b"),
    ]
    assert _max_admitted(objects, queue) == expected


def test_cohort_lending_limit_may_exceed_its_own_nominal_quota() -> None:
    # Unlike a ClusterQueue's, a Cohort's lendingLimit is not capped at its nominalQuota.
    objects = [
        flavor("f"),
        cohort("root"),
        cohort("left", parent="root", groups=quotas({"f": {"cpu": (1, None, 5)}})),
        cluster_queue("b", quotas({"f": {"cpu": 0}}), cohort="root"),
        local_queue("lq-b", "b"),
    ]
    assert _max_admitted(objects, "lq-b") == 1  # all of left's 1 cpu is lent
    with pytest.raises(InvalidObject, match="less than or equal to nominalQuota"):
        load(flavor("f"), cluster_queue("c", quotas({"f": {"cpu": (1, None, 5)}}), cohort="root"))
