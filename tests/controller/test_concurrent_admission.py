"""The concurrent-admission loop's pure parts: variant names and objects (Kueue's
``GetWorkloadNameForVariant``, ``generateVariant``) and which variant's preemption gate opens
(``selectVariantToOpenPreemptionGate``)."""

from __future__ import annotations

from typing import Any

from kadmit.controller.concurrent_admission import (
    PREEMPTION_TIMEOUT,
    gate_to_open,
    make_variant,
    variant_name,
)
from kadmit.engine.concurrent_admission import ALLOWED_FLAVORS_ANNOTATION, PARENT_LABEL, PREEMPTION_GATE
from kadmit.engine.timestamps import format_time

T0 = 1_767_225_600.0


def test_variant_name_replaces_the_parent_hash() -> None:
    name = variant_name("job-sample-job-8c7zt", "uid-1", "spot")
    prefix, digest = name.rsplit("-", 1)
    assert prefix == "job-sample-job-variant-spot" and len(digest) == 5
    assert variant_name("job-sample-job-8c7zt", "uid-1", "on-demand") != name  # the flavor is hashed in
    assert variant_name("job-sample-job-8c7zt", "uid-2", "spot") != name  # so is the parent's uid


def test_a_variant_is_the_parent_constrained_to_one_flavor() -> None:
    parent = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-a-12345",
            "namespace": "ns",
            "uid": "p-uid",
            "labels": {PARENT_LABEL: "true", "kueue.x-k8s.io/job-uid": "j"},
            "annotations": {"x": "y"},
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        },
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1}]},
    }
    variant = make_variant(parent, "spot")
    meta = variant["metadata"]
    assert meta["labels"] == {"kueue.x-k8s.io/job-uid": "j"}
    assert meta["annotations"] == {"x": "y", ALLOWED_FLAVORS_ANNOTATION: "spot"}
    assert "finalizers" not in meta
    [owner] = meta["ownerReferences"]
    assert owner == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "name": "job-a-12345",
        "uid": "p-uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert variant["spec"]["preemptionGates"] == [{"name": PREEMPTION_GATE}]
    assert "preemptionGates" not in parent["spec"]  # the parent is not changed


def _variant(
    flavor: str,
    *,
    blocked: bool = False,
    evaluated: bool = True,
    opened_at: float | None = None,
    reserved: bool = False,
    active: bool = True,
) -> dict[str, Any]:
    conditions = []
    if evaluated:
        reason = "AdmissionGated" if blocked else "Pending"
        conditions.append(
            {"type": "QuotaReserved", "status": "True" if reserved else "False", "reason": reason}
        )
    if blocked:
        conditions.append({"type": "BlockedOnPreemptionGates", "status": "True", "reason": "PreemptionGated"})
    status: dict[str, Any] = {"conditions": conditions}
    position = "Open" if opened_at is not None else "Closed"
    status["preemptionGates"] = [
        {"name": PREEMPTION_GATE, "position": position, "lastTransitionTime": format_time(opened_at or T0)}
    ]
    return {
        "metadata": {"name": f"v-{flavor}"},
        "spec": {"active": active, "preemptionGates": [{"name": PREEMPTION_GATE}]},
        "status": status,
    }


def test_the_first_blocked_variant_opens_when_no_gate_is_open() -> None:
    variants = [_variant("a"), _variant("b", blocked=True), _variant("c", blocked=True)]
    chosen, again = gate_to_open(variants, T0)
    assert chosen is variants[1] and again == PREEMPTION_TIMEOUT


def test_a_variant_not_evaluated_yet_holds_the_gates_closed() -> None:
    assert gate_to_open([_variant("a", evaluated=False), _variant("b", blocked=True)], T0) == (None, None)


def test_one_open_gate_at_a_time_for_the_preemption_timeout() -> None:
    variants = [_variant("a", blocked=True, opened_at=T0), _variant("b", blocked=True)]
    assert gate_to_open(variants, T0 + 60) == (None, PREEMPTION_TIMEOUT - 60)
    chosen, _ = gate_to_open(variants, T0 + PREEMPTION_TIMEOUT)
    assert chosen is variants[1]


def test_reserving_or_inactive_variants_are_not_admissible() -> None:
    variants = [_variant("a", reserved=True, opened_at=T0), _variant("b", blocked=True, active=False)]
    assert gate_to_open(variants, T0 + 1) == (None, None)
