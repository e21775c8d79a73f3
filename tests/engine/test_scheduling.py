"""Flavor assignment, queueing and the scheduling cycle (contract §5.1, §5.3, §5.6, §1.2)."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.engine import Engine
from tests.engine.conftest import (
    API,
    T0,
    admitted_names,
    admitted_status,
    cluster_queue,
    cohort,
    flavor,
    load,
    local_queue,
    pending_by_name,
    pod_set,
    quotas,
    workload,
)


def test_reservation_has_kueue_admission_shape(single_cq: Engine) -> None:
    single_cq.upsert_workload(workload("w", count=3, cpu="1", memory="200Mi"))
    [reservation] = single_cq.schedule(T0).reservations
    assert reservation.admission == {
        "clusterQueue": "cluster-queue",
        "podSetAssignments": [
            {
                "name": "main",
                "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
                "resourceUsage": {"cpu": "3", "memory": "600Mi"},
                "count": 3,
            }
        ],
    }
    types = {c["type"]: (c["status"], c["reason"], c["message"]) for c in reservation.conditions}
    assert types["QuotaReserved"] == ("True", "QuotaReserved", "Quota reserved in ClusterQueue cluster-queue")
    assert types["Admitted"] == ("True", "Admitted", "The workload is admitted")
    assert reservation.admitted and reservation.admission_checks == []


def test_admits_many_per_cluster_queue_in_one_cycle(single_cq: Engine) -> None:
    for i in range(12):
        single_cq.upsert_workload(workload(f"w{i:02}", created=i))
    decisions = single_cq.schedule(T0)
    assert admitted_names(decisions) == [f"w{i:02}" for i in range(9)]
    assert pending_by_name(decisions)["w09"][0] == "WaitingForQuota"


@pytest.mark.parametrize(
    ("request_cpu", "reason", "needle"),
    [
        (
            "10",
            "ExceedsMaxQuota",
            "insufficient quota for cpu in flavor default-flavor, previously considered "
            "podsets requests (0) + current podset request (10) > maximum capacity (9)",
        ),
        ("9", None, None),
    ],
)
def test_exceeds_max_quota(
    single_cq: Engine, request_cpu: str, reason: str | None, needle: str | None
) -> None:
    single_cq.upsert_workload(workload("w", cpu=request_cpu))
    decisions = single_cq.schedule(T0)
    if reason is None:
        assert admitted_names(decisions) == ["w"]
    else:
        assert pending_by_name(decisions)["w"] == (
            reason,
            f"couldn't assign flavors to pod set main: {needle}",
        )


def _two_flavors(**spec: Any) -> Engine:
    return load(
        flavor("on-demand"),
        flavor(
            "spot",
            labels={"instance-type": "spot"},
            taints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}],
        ),
        cluster_queue("cq", quotas({"on-demand": {"cpu": 2}, "spot": {"cpu": 4}}), **spec),
        local_queue("lq", "cq"),
    )


def test_flavors_are_tried_in_order() -> None:
    engine = _two_flavors()
    spot_ok = {"tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}
    for i in range(3):
        engine.upsert_workload(workload(f"w{i}", pod_sets=[pod_set(1, **spot_ok)], created=i))
    decisions = engine.schedule(T0)
    flavors = [r.admission["podSetAssignments"][0]["flavors"]["cpu"] for r in decisions.reservations]
    assert flavors == ["on-demand", "on-demand", "spot"]


def test_untolerated_taint_makes_flavor_ineligible() -> None:
    engine = _two_flavors()
    engine.upsert_workload(workload("w", count=3))
    decisions = engine.schedule(T0)
    reason, message = pending_by_name(decisions)["w"]
    assert reason == "ExceedsMaxQuota"  # on-demand holds at most 2; spot is tainted
    assert "untolerated taint {spot true NoSchedule} in flavor spot" in message


def test_flavor_tolerations_count_as_tolerating() -> None:
    engine = load(
        flavor(
            "spot",
            taints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}],
            tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        ),
        cluster_queue("cq", quotas({"spot": {"cpu": 4}})),
        local_queue("lq", "cq"),
    )
    engine.upsert_workload(workload("w"))
    assert admitted_names(engine.schedule(T0)) == ["w"]


@pytest.mark.parametrize(
    ("pod_spec", "expected"),
    [
        ({"nodeSelector": {"instance-type": "spot"}}, "spot"),
        ({"nodeSelector": {"unrelated": "x"}}, "on-demand"),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "instance-type", "operator": "In", "values": ["spot"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            "spot",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "instance-type", "operator": "NotIn", "values": ["on-demand"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            "spot",
        ),
    ],
)
def test_node_labels_against_selector_and_affinity(pod_spec: dict[str, Any], expected: str) -> None:
    engine = load(
        flavor("on-demand", labels={"instance-type": "on-demand"}),
        flavor("spot", labels={"instance-type": "spot"}),
        cluster_queue("cq", quotas({"on-demand": {"cpu": 2}, "spot": {"cpu": 2}})),
        local_queue("lq", "cq"),
    )
    engine.upsert_workload(workload("w", pod_sets=[pod_set(1, **pod_spec)]))
    [reservation] = engine.schedule(T0).reservations
    assert reservation.admission["podSetAssignments"][0]["flavors"]["cpu"] == expected


def test_no_matching_flavor_reason() -> None:
    engine = load(
        flavor("on-demand", labels={"instance-type": "on-demand"}),
        cluster_queue("cq", quotas({"on-demand": {"cpu": 2}})),
        local_queue("lq", "cq"),
    )
    engine.upsert_workload(workload("w", pod_sets=[pod_set(1, nodeSelector={"instance-type": "gpu"})]))
    assert pending_by_name(engine.schedule(T0))["w"] == (
        "NoMatchingFlavor",
        "couldn't assign flavors to pod set main: flavor on-demand doesn't match node affinity",
    )


def _borrowing_setup(**fungibility: str) -> Engine:
    spec = {"flavorFungibility": fungibility} if fungibility else {}
    return load(
        flavor("f1"),
        flavor("f2"),
        cluster_queue("cq", quotas({"f1": {"cpu": 1}, "f2": {"cpu": 2}}), cohort="team", **spec),
        cluster_queue("lender", quotas({"f1": {"cpu": 4}, "f2": {"cpu": 0}}), cohort="team"),
        local_queue("lq", "cq"),
    )


@pytest.mark.parametrize(
    ("fungibility", "expected"),
    [
        ({}, "f1"),  # whenCanBorrow: MayStopSearch → borrow on the first flavor
        ({"whenCanBorrow": "TryNextFlavor"}, "f2"),  # keep looking for one that fits without borrowing
    ],
)
def test_when_can_borrow(fungibility: dict[str, str], expected: str) -> None:
    engine = _borrowing_setup(**fungibility)
    engine.upsert_workload(workload("w", cpu="2"))
    [reservation] = engine.schedule(T0).reservations
    assert reservation.admission["podSetAssignments"][0]["flavors"]["cpu"] == expected
    assert reservation.borrowing == (expected == "f1")


def test_uncovered_zero_request_is_ignored_and_nonzero_is_rejected(single_cq: Engine) -> None:
    single_cq.upsert_workload(workload("zero", cpu="1", **{"example.com/foo": "0"}))
    single_cq.upsert_workload(workload("some", cpu="1", created=1, **{"example.com/foo": "1"}))
    decisions = single_cq.schedule(T0)
    assert admitted_names(decisions) == ["zero"]
    assert pending_by_name(decisions)["some"] == (
        "NoMatchingFlavor",
        "couldn't assign flavors to pod set main: resource example.com/foo unavailable in ClusterQueue",
    )


def test_several_pod_sets_all_or_nothing() -> None:
    engine = load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 5}})),
        local_queue("lq", "cq"),
    )
    engine.upsert_workload(workload("big", pod_sets=[pod_set(2, name="driver"), pod_set(4, name="workers")]))
    engine.upsert_workload(
        workload("ok", pod_sets=[pod_set(1, name="driver"), pod_set(3, name="workers")], created=1)
    )
    decisions = engine.schedule(T0)
    assert admitted_names(decisions) == ["ok"]
    assert engine.usage("cq") == {("f", "cpu"): 4000}
    reason, message = pending_by_name(decisions)["big"]
    assert reason == "ExceedsMaxQuota"
    assert (
        "previously considered podsets requests (2) + current podset request (4) > maximum capacity (5)"
        in message
    )
    [reservation] = decisions.reservations
    assert [p["name"] for p in reservation.admission["podSetAssignments"]] == ["driver", "workers"]


def test_partial_admission_takes_the_largest_count_that_fits(single_cq: Engine) -> None:
    single_cq.upsert_workload(workload("w", pod_sets=[pod_set(20, min_count=5)]))
    [reservation] = single_cq.schedule(T0).reservations
    psa = reservation.admission["podSetAssignments"][0]
    assert (psa["count"], psa["resourceUsage"]) == (9, {"cpu": "9"})


def test_partial_admission_below_min_count_waits(single_cq: Engine) -> None:
    single_cq.upsert_workload(workload("w", pod_sets=[pod_set(20, min_count=10)]))
    decisions = single_cq.schedule(T0)
    assert decisions.reservations == []
    assert pending_by_name(decisions)["w"][0] == "ExceedsMaxQuota"


def test_priority_then_creation_orders_the_queue(single_cq: Engine) -> None:
    single_cq.upsert_workload(workload("old-low", cpu="5", created=0, priority=1))
    single_cq.upsert_workload(workload("new-high", cpu="5", created=5, priority=10))
    single_cq.upsert_workload(workload("newer-high", cpu="5", created=6, priority=10))
    assert admitted_names(single_cq.schedule(T0)) == ["new-high"]


@pytest.mark.parametrize(("strategy", "expected"), [("StrictFIFO", []), ("BestEffortFIFO", ["small"])])
def test_strict_fifo_head_blocks(strategy: str, expected: list[str]) -> None:
    engine = load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 4}}), queueingStrategy=strategy),
        local_queue("lq", "cq"),
        workload("running", status=admitted_status("cq", {"cpu": "f"}, {"cpu": "3"})),
    )
    engine.upsert_workload(workload("big", cpu="2", created=1))
    engine.upsert_workload(workload("small", cpu="1", created=2))
    assert admitted_names(engine.schedule(T0)) == expected


@pytest.mark.parametrize(
    ("selector", "labels", "admitted"),
    [
        (None, {}, False),  # nil selects nothing
        ({}, {}, True),  # {} selects every namespace
        ({"matchLabels": {"team": "a"}}, {"team": "a"}, True),
        ({"matchLabels": {"team": "a"}}, {"team": "b"}, False),
        (
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ns"]}
                ]
            },
            {},
            True,
        ),
    ],
)
def test_namespace_selector(selector: dict[str, Any] | None, labels: dict[str, str], admitted: bool) -> None:
    cq = cluster_queue("cq", quotas({"f": {"cpu": 4}}))
    if selector is None:
        del cq["spec"]["namespaceSelector"]
    else:
        cq["spec"]["namespaceSelector"] = selector
    engine = load(flavor("f"), cq, local_queue("lq", "cq", namespace="ns"))
    engine.upsert_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "labels": labels}}
    )
    engine.upsert_workload(workload("w", namespace="ns"))
    decisions = engine.schedule(T0)
    assert bool(decisions.reservations) == admitted
    if not admitted:
        assert pending_by_name(decisions)["w"] == (
            "Misconfigured",
            "workload namespace doesn't match ClusterQueue selector",
        )


def _objects_for_inactive(case: str) -> tuple[list[dict[str, Any]], str]:
    cq_spec: dict[str, Any] = {}
    extra: list[dict[str, Any]] = [flavor("f")]
    if case == "Stopped":
        cq_spec["stopPolicy"] = "Hold"
    if case == "FlavorNotFound":
        extra = []
    if case in ("AdmissionCheckNotFound", "AdmissionCheckInactive"):
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": "check"}]}
    if case == "AdmissionCheckInactive":
        extra.append(
            {
                "apiVersion": API,
                "kind": "AdmissionCheck",
                "metadata": {"name": "check"},
                "spec": {"controllerName": "example.com/check"},
            }
        )
    cohort_name = None
    if case == "HasCycle":
        extra += [cohort("x", parent="y"), cohort("y", parent="x")]
        cohort_name = "x"
    cq = cluster_queue("cq", quotas({"f": {"cpu": 4}}), cohort=cohort_name, **cq_spec)
    return [*extra, cq, local_queue("lq", "cq")], case


@pytest.mark.parametrize(
    "case", ["Stopped", "FlavorNotFound", "AdmissionCheckNotFound", "AdmissionCheckInactive", "HasCycle"]
)
def test_inactive_cluster_queues_admit_nothing(case: str) -> None:
    objects, reason = _objects_for_inactive(case)
    engine = load(*objects)
    engine.upsert_workload(workload("w"))
    decisions = engine.schedule(T0)
    assert decisions.reservations == []
    active, why, message = engine.cluster_queue_active("cq")
    assert (active, why) == (False, reason)
    assert message.startswith("Can't admit new workloads: ")
    # Kueue's scheduler says "inactive" for a stopped queue too ("is stopped": an evicted reservation)
    assert pending_by_name(decisions)["w"] == ("Suspended", "ClusterQueue cq is inactive")


def test_missing_local_queue_and_cluster_queue_are_misconfigured() -> None:
    engine = load(flavor("f"), local_queue("orphan", "nowhere"))
    engine.upsert_workload(workload("a", "missing"))
    engine.upsert_workload(workload("b", "orphan"))
    pending = pending_by_name(engine.schedule(T0))
    assert pending["a"] == ("Misconfigured", "LocalQueue missing doesn't exist")
    assert pending["b"] == ("Misconfigured", "ClusterQueue nowhere doesn't exist")
    # Once the queue exists, the workload is routed and admitted.
    engine.upsert(cluster_queue("nowhere", quotas({"f": {"cpu": 1}})))
    assert admitted_names(engine.schedule(T0 + 1)) == ["b"]


def test_local_queue_stop_policy_suspends() -> None:
    engine = load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 1}})),
        local_queue("lq", "cq", stopPolicy="Hold"),
    )
    engine.upsert_workload(workload("w"))
    assert pending_by_name(engine.schedule(T0))["w"] == ("Suspended", "LocalQueue lq is inactive")


def test_parked_workloads_wake_when_quota_is_released(single_cq: Engine) -> None:
    single_cq.upsert_workload(workload("big", cpu="9"))
    single_cq.upsert_workload(workload("next", cpu="9", created=1))
    assert admitted_names(single_cq.schedule(T0)) == ["big"]
    again = single_cq.schedule(T0 + 1)
    assert again.reservations == [] and again.pending == []  # parked: nothing re-evaluated
    single_cq.finish("default", "big")
    assert admitted_names(single_cq.schedule(T0 + 2)) == ["next"]


def test_wake_reaches_every_queue_of_the_root_cohort() -> None:
    engine = load(
        flavor("f"),
        cluster_queue("a", quotas({"f": {"cpu": 2}}), cohort="team"),
        cluster_queue("b", quotas({"f": {"cpu": 0}}), cohort="team"),
        local_queue("lq-a", "a"),
        local_queue("lq-b", "b"),
    )
    engine.upsert_workload(workload("a1", "lq-a", cpu="2"))
    engine.schedule(T0)
    engine.upsert_workload(workload("b1", "lq-b", cpu="2", created=1))
    assert engine.schedule(T0 + 1).reservations == []
    engine.finish("default", "a1")
    assert admitted_names(engine.schedule(T0 + 2)) == ["b1"]


def test_engine_is_rebuilt_from_workload_status(single_cq: Engine) -> None:
    single_cq.upsert_workload(
        workload(
            "running",
            count=8,
            status=admitted_status("cluster-queue", {"cpu": "default-flavor"}, {"cpu": "8"}, count=8),
        )
    )
    single_cq.upsert_workload(workload("new", cpu="2", created=1))
    decisions = single_cq.schedule(T0)
    assert decisions.reservations == []
    assert single_cq.usage("cluster-queue") == {("default-flavor", "cpu"): 8000}


def test_reclaimable_pods_lower_usage(single_cq: Engine) -> None:
    status = admitted_status("cluster-queue", {"cpu": "default-flavor"}, {"cpu": "8"}, count=8)
    status["reclaimablePods"] = [{"name": "main", "count": 6}]
    single_cq.upsert_workload(workload("running", status=status))
    single_cq.upsert_workload(workload("new", cpu="7", created=1))
    assert admitted_names(single_cq.schedule(T0)) == ["new"]


def test_a_requeued_workload_asks_only_for_its_pods_not_yet_reclaimable(single_cq: Engine) -> None:
    # Kueue's totalRequestsFromPodSets: count less status.reclaimablePods, also while pending (a
    # job evicted after some of its pods finished asks for the rest): 12 pods of 1 cpu, 5 done,
    # fit the 9 cpu as 7.
    obj = workload("requeued", count=12, status={"reclaimablePods": [{"name": "main", "count": 5}]})
    single_cq.upsert_workload(obj)
    [reservation] = single_cq.schedule(T0).reservations
    [assignment] = reservation.admission["podSetAssignments"]
    assert assignment["count"] == 7
    assert assignment["resourceUsage"] == {"cpu": "7"}
    assert single_cq.usage("cluster-queue") == {("default-flavor", "cpu"): 7000}


def test_partial_admission_counts_down_from_the_pods_not_yet_reclaimable(single_cq: Engine) -> None:
    # 20 pods, 14 reclaimable, minCount 4: the 6 left fit the 9 cpu whole (not 9 of 20), and
    # with 16 reclaimable the 4 left are the floor.
    for name, done, admitted in (("partial", 14, 6), ("floor", 16, 4)):
        obj = workload(
            name,
            pod_sets=[pod_set(20, min_count=4)],
            status={"reclaimablePods": [{"name": "main", "count": done}]},
        )
        single_cq.upsert_workload(obj)
        [reservation] = single_cq.schedule(T0).reservations
        assert reservation.admission["podSetAssignments"][0]["count"] == admitted
        single_cq.delete_workload("default", name)


def test_assumed_reservation_survives_a_stale_watch_event_and_forget_undoes_it(single_cq: Engine) -> None:
    obj = workload("w", cpu="9")
    single_cq.upsert_workload(obj)
    assert admitted_names(single_cq.schedule(T0)) == ["w"]
    single_cq.upsert_workload(obj)  # the watch saw the object before our status write landed
    single_cq.upsert_workload(workload("other", cpu="9", created=1))
    assert single_cq.schedule(T0 + 1).reservations == []  # never double-booked
    single_cq.forget("default", "w")
    assert single_cq.usage("cluster-queue") == {}
    assert admitted_names(single_cq.schedule(T0 + 2)) == ["w"]


def test_deactivated_workload_is_not_queued(single_cq: Engine) -> None:
    obj = workload("w")
    obj["spec"]["active"] = False
    single_cq.upsert_workload(obj)
    assert pending_by_name(single_cq.schedule(T0))["w"] == ("Deactivated", "The workload is deactivated")


def test_a_workload_on_hold_is_kept_out_of_the_queues_until_the_hold_is_cleared(single_cq: Engine) -> None:
    """Kueue's IsOnHold (a StatefulSet scaled to zero): QuotaReserved=False, OnHold; not queued,
    its reason and message left as they are; queued again once the reason changes."""
    obj = workload("w")
    message = "StatefulSet scaled to zero; workload on hold"
    held = {"type": "QuotaReserved", "status": "False", "reason": "OnHold", "message": message,
            "lastTransitionTime": "2026-01-01T00:00:00Z"}
    obj["status"] = {"conditions": [held]}
    single_cq.upsert_workload(obj)
    decisions = single_cq.schedule(T0)
    assert decisions.reservations == []
    assert pending_by_name(decisions)["w"] == ("OnHold", message)
    obj["status"] = {"conditions": [{**held, "reason": "PendingEvaluation", "message": "no longer on hold"}]}
    single_cq.upsert_workload(obj)
    assert admitted_names(single_cq.schedule(T0 + 1)) == ["w"]


def test_pending_reason_is_reported_once(single_cq: Engine) -> None:
    single_cq.upsert_workload(workload("w", cpu="10"))
    assert "w" in pending_by_name(single_cq.schedule(T0))
    single_cq.upsert(cluster_queue("cluster-queue", quotas({"default-flavor": {"cpu": 9, "memory": "36Gi"}})))
    assert single_cq.schedule(T0 + 1).pending == []  # same reason, nothing new to write


def _stoppable(cq_stop: str = "None", lq_stop: str = "None", checks: bool = False) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"stopPolicy": cq_stop}
    objects: list[dict[str, Any]] = [flavor("f")]
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": "check"}]}
        objects.append(
            {
                "apiVersion": API,
                "kind": "AdmissionCheck",
                "metadata": {"name": "check"},
                "spec": {"controllerName": "example.com/c"},
                "status": {"conditions": [{"type": "Active", "status": "True"}]},
            }
        )
    return [
        *objects,
        cluster_queue("cq", quotas({"f": {"cpu": 4}}), **spec),
        local_queue("lq", "cq", stopPolicy=lq_stop),
    ]


@pytest.mark.parametrize("policy", ["Hold", "HoldAndDrain"])
def test_stopping_takes_back_reservations_not_yet_admitted(policy: str) -> None:
    engine = load(*_stoppable(checks=True))
    engine.upsert_workload(workload("w"))
    [reservation] = engine.schedule(T0).reservations
    assert not reservation.admitted  # waiting for its check
    engine.upsert(_stoppable(cq_stop=policy, checks=True)[-2])
    decisions = engine.schedule(T0 + 1)
    [cleared] = decisions.cleared
    assert (cleared.workload, cleared.reason, cleared.message) == (
        ("default", "w"),
        "Suspended",
        "ClusterQueue cq is stopped",
    )
    assert engine.usage("cq") == {}


@pytest.mark.parametrize(("policy", "evicted"), [("Hold", False), ("HoldAndDrain", True)])
def test_hold_and_drain_evicts_admitted_workloads(policy: str, evicted: bool) -> None:
    engine = load(*_stoppable())
    engine.upsert_workload(workload("w"))
    assert admitted_names(engine.schedule(T0)) == ["w"]
    engine.upsert(_stoppable(lq_stop=policy)[-1])
    decisions = engine.schedule(T0 + 1)
    assert [(e.workload[1], e.reason, e.message) for e in decisions.evictions] == (
        [("w", "LocalQueueStopped", "The LocalQueue is stopped")] if evicted else []
    )
    assert engine.usage("cq") != {}  # an eviction keeps the quota until the job has stopped


def test_restarted_queue_requeues_workloads_it_drained() -> None:
    engine = load(*_stoppable(cq_stop="HoldAndDrain"))
    stopped = workload("w")
    stopped["status"] = {
        "conditions": [
            {
                "type": "Requeued",
                "status": "False",
                "reason": "ClusterQueueStopped",
                "message": "The ClusterQueue is stopped",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    engine.upsert_workload(stopped)
    decisions = engine.schedule(T0)
    assert decisions.reservations == []
    engine.upsert(_stoppable()[-2])  # stopPolicy back to None
    decisions = engine.schedule(T0 + 1)
    assert [(r.workload[1], r.reason) for r in decisions.requeues] == [("w", "ClusterQueueRestarted")]
    assert admitted_names(decisions) == ["w"]


def test_priority_change_reorders_a_pending_workload(single_cq: Engine) -> None:
    single_cq.upsert_workload(
        workload(
            "running",
            count=9,
            status=admitted_status("cluster-queue", {"cpu": "default-flavor"}, {"cpu": "9"}, count=9),
        )
    )
    single_cq.upsert_workload(workload("first", cpu="5", created=1))
    single_cq.upsert_workload(workload("second", cpu="5", created=2))
    single_cq.schedule(T0)
    single_cq.upsert_workload(workload("second", cpu="5", created=2, priority=100))
    single_cq.finish("default", "running")
    assert admitted_names(single_cq.schedule(T0 + 1)) == ["second"]


def test_v1beta1_workload_is_scheduled_like_v1beta2(single_cq: Engine) -> None:
    obj = workload("old", cpu="2")
    obj["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    single_cq.upsert(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 50,
        }
    )
    obj["spec"]["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
    obj["spec"]["priorityClassName"] = "high"
    single_cq.upsert_workload(obj)
    single_cq.upsert_workload(workload("new", cpu="9", created=-10))  # older, but priority 0
    assert admitted_names(single_cq.schedule(T0)) == ["old"]


def test_written_reservation_confirms_the_assumption_without_double_counting(single_cq: Engine) -> None:
    obj = workload("w", count=3, cpu="1", memory="200Mi")
    single_cq.upsert_workload(obj)
    [reservation] = single_cq.schedule(T0).reservations
    before = single_cq.usage("cluster-queue")
    obj["status"] = {"admission": reservation.admission, "conditions": reservation.conditions}
    single_cq.upsert_workload(obj)  # the controller's status write, seen through the watch
    assert (
        single_cq.usage("cluster-queue")
        == before
        == {
            ("default-flavor", "cpu"): 3000,
            ("default-flavor", "memory"): 3 * 200 * 2**20 * 1000,
        }
    )
    single_cq.forget("default", "w")  # too late to forget: the write is confirmed
    assert single_cq.usage("cluster-queue") == before
    obj["status"]["conditions"].append(
        {
            "type": "Finished",
            "status": "True",
            "reason": "Succeeded",
            "message": "",
            "lastTransitionTime": "2026-01-01T01:00:00Z",
        }
    )
    single_cq.upsert_workload(obj)
    assert single_cq.usage("cluster-queue") == {}


def test_quota_holders_loaded_before_their_queue_are_counted() -> None:
    engine = Engine()
    engine.upsert_workload(workload("running", status=admitted_status("cq", {"cpu": "f"}, {"cpu": "3"})))
    for obj in (flavor("f"), cluster_queue("cq", quotas({"f": {"cpu": 4}})), local_queue("lq", "cq")):
        engine.upsert(obj)
    engine.upsert_workload(workload("new", cpu="2", created=1))
    decisions = engine.schedule(T0)
    assert decisions.reservations == []
    assert engine.usage("cq") == {("f", "cpu"): 3000}


def test_queue_status_counters_and_usage() -> None:
    engine = load(
        flavor("f"),
        cluster_queue("a", quotas({"f": {"cpu": 2}}), cohort="team"),
        cluster_queue(
            "b",
            quotas({"f": {"cpu": 4}}),
            cohort="team",
            admissionChecksStrategy={"admissionChecks": [{"name": "check"}]},
        ),
        {
            "apiVersion": API,
            "kind": "AdmissionCheck",
            "metadata": {"name": "check"},
            "spec": {"controllerName": "example.com/c"},
            "status": {"conditions": [{"type": "Active", "status": "True"}]},
        },
        local_queue("lq", "a"),
    )
    engine.upsert_workload(workload("big", cpu="3"))
    engine.upsert_workload(workload("waits", cpu="4", created=1))
    engine.schedule(T0)
    status = engine.cluster_queue_status("a")
    assert (status["pendingWorkloads"], status["reservingWorkloads"], status["admittedWorkloads"]) == (
        1,
        1,
        1,
    )
    assert status["flavorsReservation"] == [
        {"name": "f", "resources": [{"name": "cpu", "total": "3", "borrowed": "1"}]}
    ]
    assert status["flavorsUsage"] == status["flavorsReservation"]
    lq = engine.local_queue_status("default", "lq")
    assert (lq["pendingWorkloads"], lq["reservingWorkloads"], lq["admittedWorkloads"]) == (1, 1, 1)
    assert lq["flavorsUsage"] == [{"name": "f", "resources": [{"name": "cpu", "total": "3"}]}]
    assert engine.local_queue_active("default", "lq") == (
        True,
        "Ready",
        "Can submit new workloads to localQueue",
    )


@pytest.mark.parametrize(
    ("lq_spec", "cq_exists", "expected"),
    [
        ({"stopPolicy": "Hold"}, True, (False, "Stopped", "LocalQueue is stopped")),
        ({}, False, (False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")),
    ],
)
def test_local_queue_active_condition(
    lq_spec: dict[str, Any], cq_exists: bool, expected: tuple[bool, str, str]
) -> None:
    objects = [flavor("f"), local_queue("lq", "cq", **lq_spec)]
    if cq_exists:
        objects.append(cluster_queue("cq", quotas({"f": {"cpu": 1}})))
    assert load(*objects).local_queue_active("default", "lq") == expected


def test_workload_arriving_at_an_inactive_queue_is_told_why() -> None:
    engine = load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 1}}), stopPolicy="Hold"),
        local_queue("lq", "cq"),
    )
    engine.schedule(T0)  # the queue's inactivity has been reported already
    engine.upsert_workload(workload("late"))
    assert pending_by_name(engine.schedule(T0 + 1))["late"] == ("Suspended", "ClusterQueue cq is inactive")


def test_reclaimable_pods_of_a_running_workload_wake_parked_ones(single_cq: Engine) -> None:
    status = admitted_status("cluster-queue", {"cpu": "default-flavor"}, {"cpu": "8"}, count=8)
    running = workload("running", count=8, status=status)
    single_cq.upsert_workload(running)
    single_cq.upsert_workload(workload("next", cpu="4", created=1))
    assert single_cq.schedule(T0).reservations == []  # parked
    status["reclaimablePods"] = [{"name": "main", "count": 5}]
    single_cq.upsert_workload(running)
    assert admitted_names(single_cq.schedule(T0 + 1)) == ["next"]


def test_block_admission_waits_for_pods_ready() -> None:
    engine = Engine(block_admission=True)
    for obj in (flavor("f"), cluster_queue("cq", quotas({"f": {"cpu": 4}})), local_queue("lq", "cq")):
        engine.upsert(obj)
    first = workload("first")
    engine.upsert_workload(first)
    engine.upsert_workload(workload("second", created=1))
    decisions = engine.schedule(T0)
    [reservation] = decisions.reservations  # one at a time
    assert pending_by_name(decisions)["second"] == (
        "WaitingForPodsReady",
        "waiting for all admitted workloads to be in PodsReady condition",
    )
    assert engine.schedule(T0 + 1).reservations == []
    first["status"] = {
        "admission": reservation.admission,
        "conditions": [
            *reservation.conditions,
            {
                "type": "PodsReady",
                "status": "True",
                "reason": "Started",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:05Z",
            },
        ],
    }
    engine.upsert_workload(first)
    assert admitted_names(engine.schedule(T0 + 2)) == ["second"]


def test_reservations_do_not_share_mutable_parts(single_cq: Engine) -> None:
    single_cq.upsert_workload(workload("a"))
    single_cq.upsert_workload(workload("b", created=1))
    first, second = single_cq.schedule(T0).reservations
    first.admission["podSetAssignments"][0]["flavors"]["cpu"] = "changed by the caller"
    first.admission["podSetAssignments"][0]["resourceUsage"]["cpu"] = "99"
    assert second.admission["podSetAssignments"][0]["flavors"] == {"cpu": "default-flavor"}
    assert second.admission["podSetAssignments"][0]["resourceUsage"] == {"cpu": "1"}


def test_a_workload_scaled_down_in_place_gives_quota_back(single_cq: Engine) -> None:
    """An elastic workload scaled down keeps its admission; it charges only its new pod count
    (Kueue's ``totalRequestsFromAdmission`` scales the admitted usage to ``spec`` counts)."""
    status = admitted_status("cluster-queue", {"cpu": "default-flavor"}, {"cpu": "8"}, count=8)
    single_cq.upsert_workload(workload("elastic", count=8, status=status))
    single_cq.upsert_workload(workload("next", cpu="4", created=1))
    assert single_cq.schedule(T0).reservations == []
    single_cq.upsert_workload(workload("elastic", count=4, status=status))
    assert single_cq.usage("cluster-queue") == {("default-flavor", "cpu"): 4000}
    assert admitted_names(single_cq.schedule(T0 + 1)) == ["next"]
