"""Bounded cycles: ``Engine(heads_per_call=N)`` spreads one cycle over several ``schedule`` calls.

* given no new input, the calls together decide exactly what one unbounded call decides;
* ``decisions.more`` says whether the cycle stopped at its budget;
* input between two calls of a cycle is taken into account (a head that left is not admitted,
  quota given back is used), and a configuration change ends the cycle without corrupting usage.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kadmit.engine import Engine
from kadmit.engine import cycle as cycle_module
from kadmit.engine.store import HEADS_PER_CALL
from tests.engine.conftest import (
    T0,
    cluster_queue,
    cohort,
    flavor,
    interpreted_only,
    local_queue,
    quotas,
    workload,
)
from tests.engine.test_properties import PROPERTY_SETTINGS, check_tree, scenarios

KINDS = (
    "reservations",
    "preemptions",
    "pending",
    "admitted",
    "evictions",
    "deactivations",
    "requeues",
    "cleared",
)


def cycle(engine: Engine, now: float) -> tuple[dict[str, list[Any]], int, int, int]:
    """One whole cycle, however many calls it takes: what it decided, its attempts, its calls."""
    merged: dict[str, list[Any]] = {kind: [] for kind in KINDS}
    success = inadmissible = calls = 0
    while True:
        decisions = engine.schedule(now)
        calls += 1
        for kind in KINDS:
            merged[kind] += [dataclasses.asdict(d) for d in getattr(decisions, kind)]
        success += decisions.attempts_success
        inadmissible += decisions.attempts_inadmissible
        if not decisions.more:
            return merged, success, inadmissible, calls


def settle(engine: Engine) -> tuple[list[Any], int]:
    """Cycles until nothing is reserved or preempted; victims stop between cycles. Returns every
    cycle's decisions and how many calls they took."""
    log: list[Any] = []
    calls = 0
    for index in range(60):
        decided, success, inadmissible, used = cycle(engine, 1000.0 + index)
        calls += used
        check_tree(engine)
        log.append((decided, success, inadmissible))
        for preemption in decided["preemptions"]:
            engine.release(*preemption["victim"])
        if not decided["reservations"] and not decided["preemptions"]:
            return log, calls
    raise AssertionError("did not settle")


@PROPERTY_SETTINGS
@given(scenarios(), st.integers(1, 4), st.booleans())
def test_bounded_calls_decide_what_one_unbounded_call_decides(
    objects: list[dict[str, Any]], budget: int, fair: bool
) -> None:
    unbounded = Engine(fair_sharing=fair, heads_per_call=None)
    bounded = Engine(fair_sharing=fair, heads_per_call=budget)
    for obj in objects:
        unbounded.upsert(obj)
        bounded.upsert(obj)
    expected, unbounded_calls = settle(unbounded)
    got, bounded_calls = settle(bounded)
    assert got == expected
    assert unbounded_calls == len(expected)  # one call per cycle
    assert bounded_calls >= unbounded_calls
    for key in unbounded.workload_keys():
        assert bounded.status(*key) == unbounded.status(*key)


def three_queues(budget: int | None = 1, **spec: Any) -> Engine:
    """Queues a, b and c of 2 cpu each in cohort co, a LocalQueue lq-<name> for each."""
    engine = Engine(heads_per_call=budget)
    engine.upsert(flavor("f"))
    engine.upsert(cohort("co"))
    for name in ("a", "b", "c"):
        engine.upsert(cluster_queue(name, quotas({"f": {"cpu": 2}}), cohort="co", **spec))
        engine.upsert(local_queue(f"lq-{name}", name))
    return engine


def finish_cycle(engine: Engine, now: float) -> tuple[list[str], int]:
    """Calls until the cycle in progress is over: the workloads reserved, and the calls."""
    names: list[str] = []
    calls = 0
    while True:
        decisions = engine.schedule(now)
        calls += 1
        names += [r.workload[1] for r in decisions.reservations]
        if not decisions.more:
            return names, calls


def test_more_says_whether_the_cycle_stopped_at_its_budget() -> None:
    engine = three_queues(budget=2)
    for name in ("a", "b", "c"):
        engine.upsert(workload(f"w-{name}", f"lq-{name}"))
    first = engine.schedule(T0)
    assert first.more and not first.reservations  # two nominations: the budget is spent
    admitted, calls = finish_cycle(engine, T0)
    assert admitted == ["w-a", "w-b", "w-c"] and calls == 3
    idle = engine.schedule(T0 + 1)
    assert not idle.more and not idle


def test_a_cycle_with_nothing_to_try_costs_no_budget() -> None:
    engine = three_queues(budget=1)
    assert not engine.schedule(T0).more  # three empty queues: nothing to nominate


def test_unbounded_engine_decides_everything_in_one_call() -> None:
    engine = three_queues(budget=None)
    for i in range(6):
        engine.upsert(workload(f"w{i}", f"lq-{'abc'[i % 3]}"))
    decisions = engine.schedule(T0)
    assert not decisions.more and len(decisions.reservations) == 6


def test_default_bound_and_its_validation() -> None:
    assert Engine().heads_per_call == HEADS_PER_CALL
    with pytest.raises(ValueError, match="heads_per_call"):
        Engine(heads_per_call=0)


def test_a_head_that_left_between_calls_is_not_admitted() -> None:
    engine = three_queues(budget=3)
    for name in ("a", "b", "c"):
        engine.upsert(workload(f"w-{name}", f"lq-{name}"))
    assert engine.schedule(T0).more  # all three nominated, none decided
    engine.delete_workload("default", "w-b")
    engine.finish("default", "w-c")
    assert finish_cycle(engine, T0)[0] == ["w-a"]
    assert engine.usage("co") == {("f", "cpu"): 1000}


def test_a_newcomer_between_calls_waits_for_its_round() -> None:
    engine = three_queues(budget=2)
    engine.upsert(workload("first", "lq-a", priority=1))
    engine.upsert(workload("other", "lq-b"))
    assert engine.schedule(T0).more  # both nominated, none decided
    engine.upsert(workload("urgent", "lq-a", priority=10))  # now the head of a's queue
    assert finish_cycle(engine, T0)[0] == ["other", "urgent", "first"]


def test_quota_given_back_between_calls_is_used() -> None:
    engine = three_queues(budget=1)
    engine.upsert(workload("hog", "lq-a", cpu="6"))
    finish_cycle(engine, T0)  # the whole cohort is taken
    engine.upsert(workload("w-b", "lq-b", cpu="2"))
    engine.upsert(workload("w-c", "lq-c", cpu="2"))
    assert engine.schedule(T0 + 1).more  # b nominated while there is no room
    engine.finish("default", "hog")
    admitted = finish_cycle(engine, T0 + 1)[0] + finish_cycle(engine, T0 + 2)[0]
    assert sorted(admitted) == ["w-b", "w-c"]  # b was not parked on a stale "no room"


def test_a_configuration_change_between_calls_ends_the_cycle() -> None:
    engine = three_queues(budget=1, preemption={"withinClusterQueue": "LowerPriority"})
    engine.upsert(workload("low", "lq-a", cpu="6", priority=0))
    finish_cycle(engine, T0)  # the whole cohort is taken
    engine.upsert(workload("high", "lq-a", cpu="2", priority=5))
    engine.upsert(workload("w-b", "lq-b", cpu="2"))
    preempted = False
    while not preempted:  # stop right after the preemption: its claim on the quota is held
        decisions = engine.schedule(T0 + 1)
        assert decisions.more
        preempted = bool(decisions.preemptions)
    engine.upsert(cluster_queue("c", quotas({"f": {"cpu": 3}}), cohort="co"))  # the tree is rebuilt
    finish_cycle(engine, T0 + 1)
    check_tree(engine)
    held = sum(entry.charged.get(("f", "cpu"), 0) for entry in engine._entries.values())
    assert engine.usage("co").get(("f", "cpu"), 0) == held  # the claim was not taken off the new tree


@interpreted_only
def test_input_in_another_tree_does_not_nominate_a_head_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A head's nomination reads its own cohort tree only: a change in another tree between two
    calls leaves it as it was, and only the changed tree's head searches for victims again."""
    engine = Engine(heads_per_call=2)
    engine.upsert(flavor("f"))
    for tree in ("one", "two"):
        engine.upsert(cohort(tree))
        engine.upsert(cluster_queue(tree, quotas({"f": {"cpu": 2}}), cohort=tree,
                                    preemption={"withinClusterQueue": "LowerPriority"}))
        engine.upsert(local_queue(f"lq-{tree}", tree))
        engine.upsert(workload(f"low-{tree}", f"lq-{tree}", cpu="2", priority=0))
    finish_cycle(engine, T0)  # both queues are full
    searched: list[str] = []
    real_search = cycle_module.find_targets

    def counting(preemptor: Any, *args: Any, **kwargs: Any) -> Any:
        searched.append(preemptor.cq.name)
        return real_search(preemptor, *args, **kwargs)

    monkeypatch.setattr(cycle_module, "find_targets", counting)
    engine.upsert(workload("high-one", "lq-one", cpu="2", priority=5))
    engine.upsert(workload("high-two", "lq-two", cpu="2", priority=5))
    assert engine.schedule(T0 + 1).more  # both heads nominated (and searched), none decided
    assert sorted(searched) == ["one", "two"]
    engine.upsert(workload("newcomer", "lq-two", cpu="1", priority=1))  # input in tree two only
    preempted: list[str] = []
    while True:
        decisions = engine.schedule(T0 + 1)
        preempted += [p.victim[1] for p in decisions.preemptions]
        if not decisions.more:
            break
    assert sorted(preempted) == ["low-one", "low-two"]
    assert sorted(searched) == ["one", "two", "two"]  # tree one's head kept its nomination
