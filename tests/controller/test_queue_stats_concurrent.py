"""Queue counts with ConcurrentAdmission (Kueue's integration test "Should not count variant
workloads in unadmitted workload metrics"): variants count as the queued and reserving
workloads they are, never as unadmitted; a parent counts only as unadmitted until Admitted, and
its admission (a copy of its variant's) is not counted twice."""

from __future__ import annotations

from kadmit.controller.queue_stats import compute
from kadmit.engine.concurrent_admission import PARENT_LABEL
from tests.controller.test_queue_stats import LQS, Obj, wl


def parent(**kw: bool) -> Obj:
    obj = wl("parent", **kw)
    obj["metadata"]["labels"] = {PARENT_LABEL: "true"}
    obj["metadata"]["uid"] = "p"
    return obj


def variant(name: str, **kw: bool) -> Obj:
    obj = wl(name, **kw)
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "name": "parent",
            "uid": "p",
            "controller": True,
        }
    ]
    return obj


def test_pending_family_counts_its_variants_queued_and_the_parent_unadmitted() -> None:
    stats = compute([parent(), variant("v-a"), variant("v-b")], LQS)
    cq = stats.cluster_queues["cq"]
    assert (cq.pending_active, cq.reserving) == (2, 0)
    assert sum(cq.unadmitted.values()) == 1  # the parent only


def test_admitted_family_counts_the_variants_quota_once() -> None:
    stats = compute(
        [parent(reserved=True, admitted=True), variant("v-a", reserved=True, admitted=True), variant("v-b")],
        LQS,
    )
    cq = stats.cluster_queues["cq"]
    assert (cq.pending_active, cq.reserving, cq.admitted) == (1, 1, 1)
    assert cq.reservation == {("on-demand", "cpu"): 2000}
    assert cq.unadmitted == {}


def test_finished_family_counts_the_parent_once() -> None:
    stats = compute([parent(finished=True), variant("v-a", finished=True)], LQS)
    assert stats.cluster_queues["cq"].finished == 1
