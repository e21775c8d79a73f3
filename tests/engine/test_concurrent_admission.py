"""ConcurrentAdmission on the engine alone.

The first three tests are Kueue's ``TestScheduleConcurrentAdmission``
(``pkg/scheduler/scheduler_concurrent_admission_test.go``, all three of its cases), translated:
same setup (flavors reservation / on-demand / spot, ClusterQueue ``concurrent-cq`` with on-demand
and spot at 10 cpu each, namespace eng-alpha), one Kueue cycle (``max_rounds=1``), same
outcomes. The rest cover what the cases take for granted: parents are neither scheduled nor
charged, a variant only takes its allowed flavor, and the gate off leaves everything as before.
"""

from __future__ import annotations

from typing import Any

from kadmit.engine import Engine
from kadmit.engine.concurrent_admission import (
    ALLOWED_FLAVORS_ANNOTATION,
    PARENT_LABEL,
    migration_message,
)
from tests.engine.conftest import (
    API,
    admitted_names,
    admitted_status,
    cluster_queue,
    flavor,
    local_queue,
    pending_by_name,
    quotas,
    workload,
)

NS = "eng-alpha"
PARENT = {
    "apiVersion": API,
    "kind": "Workload",
    "name": "parent-workload",
    "uid": "parent-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}


def _namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {"dep": "eng"}}}


def _selector() -> dict[str, Any]:
    return {"matchExpressions": [{"key": "dep", "operator": "In", "values": ["eng"]}]}


def _engine(*cqs: dict[str, Any], gate: bool = True) -> Engine:
    engine = Engine(max_rounds=1, concurrent_admission=gate)
    for obj in (flavor("reservation"), flavor("on-demand"), flavor("spot"), _namespace(), *cqs):
        engine.upsert(obj)
    engine.upsert(local_queue("concurrent-queue", "concurrent-cq", namespace=NS))
    return engine


def _reserved(engine: Engine, cq: str) -> dict[str, str]:
    usage = engine.cluster_queue_status(cq)["flavorsReservation"]
    return {f["name"]: f["resources"][0]["total"] for f in usage}


def _pending_names(engine: Engine, cq: str) -> list[str]:
    return [w.name for w in engine.pending_workloads(cq) or []]


def _concurrent_cq(**spec: Any) -> dict[str, Any]:
    return cluster_queue(
        "concurrent-cq",
        quotas({"on-demand": {"cpu": 10}, "spot": {"cpu": 10}}),
        namespaceSelector=_selector(),
        **spec,
    )


def _variant(
    name: str, uid: str, flavor_name: str, queue: str = "concurrent-queue", *, admitted_in: str | None = None
) -> dict[str, Any]:
    status = admitted_status(admitted_in, {"cpu": flavor_name}, {"cpu": "10"}) if admitted_in else None
    obj = workload(name, queue, namespace=NS, cpu="10", status=status)
    obj["metadata"]["uid"] = uid
    obj["metadata"]["ownerReferences"] = [dict(PARENT)]
    obj["metadata"]["annotations"] = {ALLOWED_FLAVORS_ANNOTATION: flavor_name}
    return obj


def test_more_favorable_variant_evicts_less_favorable_sibling() -> None:
    """Kueue: "concurrent admission: more favorable variant evicts less favorable sibling"."""
    engine = _engine(_concurrent_cq())
    engine.upsert_workload(
        _variant("sibling-less-favorable", "sibling-uid", "spot", admitted_in="concurrent-cq")
    )
    engine.upsert_workload(_variant("candidate-more-favorable", "candidate-uid", "on-demand"))
    decisions = engine.schedule(1000.0)
    assert admitted_names(decisions) == []
    assert decisions.preemptions == []
    [eviction] = decisions.evictions
    assert eviction.workload == (NS, "sibling-less-favorable")
    assert eviction.reason == "FlavorMigration"
    assert eviction.message == (
        "Evicted to accommodate a workload (UID: candidate-uid) due to migration to more favorable "
        "resource flavor"
    )
    assert eviction.message == migration_message("candidate-uid")
    assert pending_by_name(decisions)["candidate-more-favorable"] == (
        "WaitingForPreemptedWorkloads",
        ". Pending the migration of 1 workload(s)",
    )
    # the sibling keeps its assignment until it is gone; the candidate is left in the queue
    assert _reserved(engine, "concurrent-cq") == {"on-demand": "0", "spot": "10"}
    assert _pending_names(engine, "concurrent-cq") == ["candidate-more-favorable"]


def test_less_favorable_variant_is_skipped_when_more_favorable_sibling_is_admitted() -> None:
    """Kueue: "concurrent admission: less favorable variant is skipped when more favorable
    sibling is admitted"."""
    engine = _engine(_concurrent_cq())
    engine.upsert_workload(
        _variant("sibling-more-favorable", "sibling-uid", "on-demand", admitted_in="concurrent-cq")
    )
    engine.upsert_workload(_variant("candidate-less-favorable", "candidate-uid", "spot"))
    decisions = engine.schedule(1000.0)
    assert admitted_names(decisions) == []
    assert decisions.evictions == []
    assert pending_by_name(decisions)["candidate-less-favorable"] == (
        "PendingEvaluation",
        "A more favorable variant is already admitted",
    )
    assert _pending_names(engine, "concurrent-cq") == ["candidate-less-favorable"]


def test_migration_is_stopped_below_last_acceptable_flavor() -> None:
    """Kueue: "concurrent admission: migration is stopped when target flavor is below
    LastAcceptableFlavorName"."""
    with_min_pref = cluster_queue(
        "concurrent-cq-with-min-pref",
        quotas({"reservation": {"cpu": 10}, "on-demand": {"cpu": 10}, "spot": {"cpu": 10}}),
        namespaceSelector=_selector(),
        concurrentAdmissionPolicy={
            "migration": {
                "mode": "TryPreferredFlavors",
                "constraints": {"lastAcceptableFlavorName": "reservation"},
            }
        },
    )
    engine = _engine(_concurrent_cq(), with_min_pref)
    engine.upsert(local_queue("concurrent-queue-new", "concurrent-cq-with-min-pref", namespace=NS))
    engine.upsert_workload(
        _variant(
            "sibling-less-favorable",
            "sibling-uid",
            "spot",
            "concurrent-queue-new",
            admitted_in="concurrent-cq-with-min-pref",
        )
    )
    engine.upsert_workload(
        _variant("candidate-more-favorable", "candidate-uid", "on-demand", "concurrent-queue-new")
    )
    decisions = engine.schedule(1000.0)
    assert admitted_names(decisions) == []
    assert decisions.evictions == []
    assert pending_by_name(decisions)["candidate-more-favorable"] == (
        "PendingEvaluation",
        "Target flavor is below LastAcceptableFlavorName",
    )
    assert _pending_names(engine, "concurrent-cq-with-min-pref") == ["candidate-more-favorable"]


def test_migration_completes_once_the_sibling_releases() -> None:
    """After the eviction is written and the evicted sibling gives its quota back, the waiting
    variant is admitted on its preferred flavor."""
    engine = _engine(_concurrent_cq())
    engine.upsert_workload(_variant("spot-variant", "sibling-uid", "spot", admitted_in="concurrent-cq"))
    engine.upsert_workload(_variant("on-demand-variant", "candidate-uid", "on-demand"))
    first = engine.schedule(1000.0)
    assert [e.workload[1] for e in first.evictions] == ["spot-variant"]
    engine.release(NS, "spot-variant")
    engine.upsert(  # the sibling is deactivated by the controller: it leaves the queue
        {
            **_variant("spot-variant", "sibling-uid", "spot"),
            "spec": {**_variant("spot-variant", "sibling-uid", "spot")["spec"], "active": False},
        }
    )
    second = engine.schedule(1001.0)
    [reservation] = second.reservations
    assert reservation.workload == (NS, "on-demand-variant")
    assert reservation.admission["podSetAssignments"][0]["flavors"] == {"cpu": "on-demand"}


def test_variant_takes_only_its_allowed_flavor() -> None:
    """on-demand is free, but the spot variant may only go to spot (Kueue's flavor assigner
    skips the others "due to WorkloadAllowedResourceFlavorAnnotation annotation")."""
    engine = _engine(_concurrent_cq(concurrentAdmissionPolicy={"migration": {"mode": "TryPreferredFlavors"}}))
    engine.upsert_workload(_variant("spot-variant", "uid-spot", "spot"))
    decisions = engine.schedule(1000.0)
    [reservation] = decisions.reservations
    assert reservation.admission["podSetAssignments"][0]["flavors"] == {"cpu": "spot"}


def test_parent_is_neither_queued_nor_charged() -> None:
    """The parent of a ClusterQueue with a policy waits for its variants: it is not scheduled,
    and its admission (copied from the admitted variant) charges nothing a second time."""
    policy = {"migration": {"mode": "RetainFirstAdmission"}}
    engine = _engine(_concurrent_cq(concurrentAdmissionPolicy=policy))
    parent = workload("parent-workload", "concurrent-queue", namespace=NS, cpu="10")
    parent["metadata"]["uid"] = "parent-uid"
    engine.upsert_workload(parent)
    assert engine.schedule(1000.0).reservations == []
    assert _pending_names(engine, "concurrent-cq") == []
    variant = _variant("v-spot", "uid-v-spot", "spot", admitted_in="concurrent-cq")
    engine.upsert_workload(variant)
    admitted_parent = workload(
        "parent-workload",
        "concurrent-queue",
        namespace=NS,
        cpu="10",
        status=admitted_status("concurrent-cq", {"cpu": "spot"}, {"cpu": "10"}),
    )
    admitted_parent["metadata"].update(uid="parent-uid", labels={PARENT_LABEL: "true"})
    engine.upsert_workload(admitted_parent)
    assert _reserved(engine, "concurrent-cq") == {"on-demand": "0", "spot": "10"}
    assert engine.cluster_queue_status("concurrent-cq")["reservingWorkloads"] == 1


def test_gate_off_ignores_variants() -> None:
    """Without the ConcurrentAdmission gate the annotation and owner mean nothing (Kueue's
    ``IsFlavorAllowedForVariant`` is true for every flavor then)."""
    engine = _engine(_concurrent_cq(), gate=False)
    engine.upsert_workload(_variant("spot-variant", "uid-spot", "spot"))
    decisions = engine.schedule(1000.0)
    [reservation] = decisions.reservations
    assert reservation.admission["podSetAssignments"][0]["flavors"] == {"cpu": "on-demand"}


def _gated_setup(position: str | None) -> tuple[Engine, dict[str, Any]]:
    """A low-priority workload holds spot; a higher-priority spot variant with Kueue's
    concurrent-admission preemption gate (``position``: its state, None: only in the spec)."""
    engine = _engine(_concurrent_cq(preemption={"withinClusterQueue": "LowerPriority"}))
    low = workload(
        "low",
        "concurrent-queue",
        namespace=NS,
        cpu="10",
        priority=0,
        status=admitted_status("concurrent-cq", {"cpu": "spot"}, {"cpu": "10"}),
    )
    engine.upsert_workload(low)
    variant = _variant("spot-variant", "uid-spot", "spot")
    variant["spec"]["priority"] = 100
    variant["spec"]["preemptionGates"] = [{"name": "kueue.x-k8s.io/concurrent-admission"}]
    if position is not None:
        variant["status"] = {
            "preemptionGates": [
                {
                    "name": "kueue.x-k8s.io/concurrent-admission",
                    "position": position,
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    engine.upsert_workload(variant)
    return engine, variant


def test_a_closed_preemption_gate_keeps_a_variant_from_preempting() -> None:
    """Kueue's scheduler: a workload that needs preemption behind a closed gate is pending
    AdmissionGated with BlockedOnPreemptionGates=True; once the gate opens it preempts."""
    for position in (None, "Closed"):
        engine, variant = _gated_setup(position)
        decisions = engine.schedule(1000.0)
        assert decisions.preemptions == []
        [pending] = decisions.pending
        assert (pending.reason, pending.message) == (
            "AdmissionGated",
            "Workload requires preemption, but it's gated",
        )
        blocked = {c["type"]: (c["status"], c["reason"]) for c in pending.conditions}
        assert blocked["BlockedOnPreemptionGates"] == ("True", "PreemptionGated")
    variant["status"]["preemptionGates"][0]["position"] = "Open"
    engine.upsert_workload(variant)
    decisions = engine.schedule(1001.0)
    assert [p.victim[1] for p in decisions.preemptions] == ["low"]


def test_an_open_preemption_gate_lets_a_variant_preempt() -> None:
    engine, _ = _gated_setup("Open")
    assert [p.victim[1] for p in engine.schedule(1000.0).preemptions] == ["low"]
