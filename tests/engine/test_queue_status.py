"""Queue status from totals kept as workloads change: always what a count of every workload gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kadmit.engine import Engine
from kadmit.engine.status import _holders_status
from tests.engine.conftest import (
    API,
    T0,
    admitted_status,
    cluster_queue,
    flavor,
    load,
    local_queue,
    quotas,
    workload,
)
from tests.engine.test_properties import PROPERTY_SETTINGS, scenarios


def check_totals(engine: Engine) -> None:
    """Each queue's status is what counting every workload gives (the engine's former way)."""
    engine.sync()
    entries = list(engine._entries.values())
    for name, cq in engine.cluster_queues.items():
        holders = [e for e in entries if e.reserved_in == name]
        queue = engine._queues.get(name)
        held = 0  # waiting outside the heap: a held LocalQueue, a requeue backoff
        for e in entries:
            reason, message = engine._unrouted.get(e.key, ("", ""))
            lq_of = engine.local_queues.get((e.wl.namespace, e.wl.queue_name))
            if (
                reason in ("Suspended", "PendingEvaluation")
                and message
                and lq_of
                and lq_of.cluster_queue == name
            ):
                held += 1
        expected = {
            "pendingWorkloads": (len(list(queue.entries())) if queue is not None else 0) + held,
            **_holders_status(holders, cq.resource_groups, engine._nodes[name].nominal),
        }
        assert engine.cluster_queue_status(name) == expected, name
    for (namespace, name), lq in engine.local_queues.items():
        mine = [e for e in entries if (e.wl.namespace, e.wl.queue_name) == (namespace, name)]
        target = engine.cluster_queues.get(lq.cluster_queue)
        groups = target.resource_groups if target is not None else ()
        expected = {
            "pendingWorkloads": sum(
                1 for e in mine if e.reserved_in is None and e.wl.active and not e.wl.finished
            ),
            **_holders_status([e for e in mine if e.reserved_in is not None], groups, None),
        }
        assert engine.local_queue_status(namespace, name) == expected, (namespace, name)


@PROPERTY_SETTINGS
@given(scenarios(), st.randoms(use_true_random=False))
def test_totals_match_a_count_of_every_workload(objects: list[dict[str, Any]], rnd: Any) -> None:
    engine = Engine(heads_per_call=None)
    for obj in objects:
        engine.upsert(obj)
    check_totals(engine)
    for index in range(20):
        decisions = engine.schedule(T0 + index)
        check_totals(engine)
        for preemption in decisions.preemptions:
            engine.release(*preemption.victim)
        for reservation in decisions.reservations:
            if rnd.random() < 0.3:
                engine.finish(*reservation.workload)
            elif rnd.random() < 0.2:
                engine.forget(*reservation.workload)
        keys = engine.workload_keys()
        if keys and rnd.random() < 0.3:
            engine.delete_workload(*rnd.choice(keys))
        check_totals(engine)


def test_a_workload_that_moves_to_another_local_queue_is_counted_there() -> None:
    engine = load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 4}})),
        local_queue("lq", "cq"),
        local_queue("other", "cq"),
    )
    engine.upsert(workload("w", "lq"))
    assert engine.local_queue_status("default", "lq")["pendingWorkloads"] == 1
    engine.upsert(workload("w", "other"))
    assert engine.local_queue_status("default", "lq")["pendingWorkloads"] == 0
    assert engine.local_queue_status("default", "other")["pendingWorkloads"] == 1
    check_totals(engine)


def test_workloads_loaded_with_their_reservation_are_counted() -> None:
    engine = load(flavor("f"), cluster_queue("cq", quotas({"f": {"cpu": 4}})), local_queue("lq", "cq"))
    engine.upsert(workload("running", status=admitted_status("cq", {"cpu": "f"}, {"cpu": "3"})))
    status = engine.cluster_queue_status("cq")
    assert (status["reservingWorkloads"], status["admittedWorkloads"]) == (1, 1)
    assert status["flavorsUsage"] == [
        {"name": "f", "resources": [{"name": "cpu", "total": "3", "borrowed": "0"}]}
    ]
    engine.finish("default", "running")
    status = engine.cluster_queue_status("cq")
    assert (status["reservingWorkloads"], status["admittedWorkloads"]) == (0, 0)
    check_totals(engine)


def test_a_reservation_waiting_for_its_checks_counts_once_admitted() -> None:
    engine = load(
        flavor("f"),
        cluster_queue(
            "cq", quotas({"f": {"cpu": 4}}), admissionChecksStrategy={"admissionChecks": [{"name": "check"}]}
        ),
        {
            "apiVersion": API,
            "kind": "AdmissionCheck",
            "metadata": {"name": "check"},
            "spec": {"controllerName": "example.com/c"},
            "status": {"conditions": [{"type": "Active", "status": "True"}]},
        },
        local_queue("lq", "cq"),
    )
    engine.upsert(workload("w", cpu="3"))
    [reservation] = engine.schedule(T0).reservations
    assert reservation.admission_checks == ["check"]
    status = engine.cluster_queue_status("cq")
    assert (status["reservingWorkloads"], status["admittedWorkloads"]) == (1, 0)
    assert status["flavorsUsage"][0]["resources"][0]["total"] == "0"
    assert status["flavorsReservation"][0]["resources"][0]["total"] == "3"
    check_totals(engine)
    engine.set_check_states("default", "w", [{"name": "check", "state": "Ready"}])
    assert engine.schedule(T0 + 1).admitted
    status = engine.cluster_queue_status("cq")
    assert (status["reservingWorkloads"], status["admittedWorkloads"]) == (1, 1)
    assert status["flavorsUsage"][0]["resources"][0]["total"] == "3"
    check_totals(engine)
    engine.forget("default", "w")  # not assumed any more: nothing happens
    engine.release("default", "w")
    assert engine.cluster_queue_status("cq")["reservingWorkloads"] == 0
    check_totals(engine)


def test_finished_and_deactivated_workloads_are_not_pending() -> None:
    engine = load(flavor("f"), cluster_queue("cq", quotas({"f": {"cpu": 1}})), local_queue("lq", "cq"))
    for name in ("a", "b", "c"):
        engine.upsert(workload(name, cpu="1"))
    assert engine.local_queue_status("default", "lq")["pendingWorkloads"] == 3
    finished = workload("a", cpu="1")
    finished["status"] = {
        "conditions": [
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    engine.upsert(finished)
    inactive = workload("b", cpu="1")
    inactive["spec"]["active"] = False
    engine.upsert(inactive)
    assert engine.local_queue_status("default", "lq")["pendingWorkloads"] == 1
    assert engine.cluster_queue_status("cq")["pendingWorkloads"] == 1
    check_totals(engine)


def test_a_held_local_queue_and_a_backoff_still_count_as_pending_in_the_cluster_queue() -> None:
    engine = load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 1}})),
        local_queue("lq", "cq"),
        local_queue("held", "cq", stopPolicy="Hold"),
    )
    engine.upsert(workload("on-hold", "held"))
    later = T0 + 600
    waiting = workload("backoff")
    waiting["status"] = {
        "requeueState": {"requeueAt": "2026-01-01T00:10:00Z", "count": 1},
        "conditions": [
            {
                "type": "Requeued",
                "status": "False",
                "reason": "PodsReadyTimeout",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    engine.upsert(waiting)
    engine.schedule(T0)
    assert engine.cluster_queue_status("cq")["pendingWorkloads"] == 2
    assert engine.local_queue_status("default", "held")["pendingWorkloads"] == 1
    check_totals(engine)
    engine.delete_workload("default", "on-hold")
    engine.schedule(later + 1)  # the backoff is over: queued, and admitted
    assert engine.cluster_queue_status("cq")["pendingWorkloads"] == 0
    check_totals(engine)
