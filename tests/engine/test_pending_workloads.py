"""``Engine.pending_workloads``: the Visibility API's order and positions, from the engine's queues."""

from __future__ import annotations

from kadmit.engine import Engine, PendingWorkload
from tests.engine.conftest import T0, cluster_queue, flavor, load, local_queue, quotas, workload


def _setup() -> Engine:
    return load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 2}})),
        local_queue("a", "cq"),
        local_queue("b", "cq"),
        local_queue("a", "cq", namespace="other"),
    )


def test_positions_follow_priority_then_creation_across_local_queues() -> None:
    engine = _setup()
    engine.upsert(workload("w1", "a", created=1, cpu="2"))
    engine.upsert(workload("w2", "b", created=2, cpu="2"))
    engine.upsert(workload("w3", "a", created=3, cpu="2", priority=10))
    engine.upsert(workload("w4", "a", created=4, cpu="2", namespace="other"))
    engine.upsert(workload("w5", "a", created=5, cpu="2"))

    assert engine.pending_workloads("cq") == [
        PendingWorkload("default", "w3", 10, "a", 0, 0),
        PendingWorkload("default", "w1", 0, "a", 1, 1),
        PendingWorkload("default", "w2", 0, "b", 2, 0),
        PendingWorkload("other", "w4", 0, "a", 3, 0),
        PendingWorkload("default", "w5", 0, "a", 4, 2),
    ]


def test_admitted_ones_leave_and_parked_ones_stay() -> None:
    engine = _setup()
    for i in range(5):
        engine.upsert(workload(f"w{i}", "a", created=i, cpu="1"))
    decisions = engine.schedule(T0 + 10)
    assert sorted(r.workload[1] for r in decisions.reservations) == ["w0", "w1"]
    pending = engine.pending_workloads("cq")
    assert pending is not None
    # w2..w4 did not fit: parked (inadmissible) but still pending, in order.
    assert [(p.name, p.position_in_cluster_queue, p.position_in_local_queue) for p in pending] == [
        ("w2", 0, 0),
        ("w3", 1, 1),
        ("w4", 2, 2),
    ]
    assert engine.cluster_queue_status("cq")["pendingWorkloads"] == len(pending)
    engine.finish("default", "w0")
    engine.delete_workload("default", "w3")
    assert [p.name for p in engine.pending_workloads("cq") or []] == ["w2", "w4"]


def test_unknown_cluster_queue_is_none_and_an_empty_one_is_empty() -> None:
    engine = _setup()
    assert engine.pending_workloads("nope") is None
    assert engine.pending_workloads("cq") == []


def test_pages_of_the_cluster_queue_and_of_a_local_queue() -> None:
    engine = _setup()
    for i, queue in enumerate(["a", "b", "a", "b", "a", "a"]):
        engine.upsert(workload(f"w{i}", queue, created=i, cpu="2"))
    everything = engine.pending_workloads("cq")
    assert everything is not None
    assert engine.pending_workloads("cq", offset=2, limit=3) == everything[2:5]
    assert engine.pending_workloads("cq", offset=5, limit=10) == everything[5:]
    assert engine.pending_workloads("cq", limit=0) == []
    mine = [p for p in everything if p.local_queue == "a"]
    assert engine.pending_workloads("cq", local_queue=("default", "a")) == mine
    assert engine.pending_workloads("cq", local_queue=("default", "a"), offset=1, limit=2) == mine[1:3]
    assert [p.position_in_local_queue for p in mine] == [0, 1, 2, 3]
    assert engine.pending_workloads("cq", local_queue=("other", "a")) == []


def test_the_order_is_kept_until_a_workload_joins_or_leaves() -> None:
    engine = _setup()
    for i in range(3):
        engine.upsert(workload(f"w{i}", "a", created=i, cpu="2"))
    first = engine.pending_workloads("cq")
    queue = engine._queues["cq"]
    assert queue.ordered() is queue.ordered()  # cached
    engine.upsert(workload("urgent", "a", created=9, cpu="2", priority=5))
    after = engine.pending_workloads("cq")
    assert after is not None and first is not None
    assert [p.name for p in after] == ["urgent", *[p.name for p in first]]
    engine.delete_workload("default", "w1")
    assert [p.name for p in engine.pending_workloads("cq") or []] == ["urgent", "w0", "w2"]
