"""Queue counts and quota held, from Workloads as the API holds them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kadmit.controller.queue_stats import IncrementalStats, compute, flavor_usage

Obj = dict[str, Any]


def wl(
    name: str,
    *,
    reserved: bool = False,
    admitted: bool = False,
    finished: bool = False,
    pending_reason: str | None = None,
    cpu: str = "2",
    count: int = 2,
    reclaimable: int = 0,
) -> Obj:
    conditions: list[Obj] = []
    status: Obj = {"conditions": conditions}
    if reserved:
        conditions.append({"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"})
        status["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": count,
                    "flavors": {"cpu": "on-demand"},
                    "resourceUsage": {"cpu": cpu},
                }
            ],
        }
    elif pending_reason is not None:
        conditions.append({"type": "QuotaReserved", "status": "False", "reason": pending_reason})
    if admitted:
        conditions.append({"type": "Admitted", "status": "True", "reason": "Admitted"})
    if finished:
        conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    if reclaimable:
        status["reclaimablePods"] = [{"name": "main", "count": reclaimable}]
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"queueName": "lq"}, "status": status}


LQS = {("ns", "lq"): {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}}}
CQ = {
    "metadata": {"name": "cq"},
    "spec": {
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": "3"}]},
                    {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "1"}]},
                ],
            }
        ]
    },
}


def test_counts_and_quota_per_queue() -> None:
    stats = compute(
        [
            wl("running", reserved=True, admitted=True),
            wl("checking", reserved=True, cpu="1", count=1),
            wl("queued"),
            wl("parked", pending_reason="WaitingForQuota"),
            wl("done", reserved=True, admitted=True, finished=True),
            wl("half-done", reserved=True, admitted=True, cpu="4", count=4, reclaimable=2),
        ],
        LQS,
    )
    cq = stats.cluster_queues["cq"]
    assert (cq.pending_active, cq.pending_inadmissible, cq.reserving, cq.admitted, cq.finished) == (
        1,
        1,
        3,
        2,
        1,
    )
    # 2 + 1 + (4 CPUs for 4 pods, 2 of them reclaimable: 2) reserved; 2 + 2 used by admitted ones
    assert cq.reservation == {("on-demand", "cpu"): 5000}
    assert cq.usage == {("on-demand", "cpu"): 4000}
    assert stats.local_queues[("ns", "lq")].reserving == 3


def test_flavor_usage_lists_every_flavor_with_borrowing() -> None:
    assert flavor_usage(CQ, {("on-demand", "cpu"): 5000}, borrowed=True) == [
        {"name": "on-demand", "resources": [{"name": "cpu", "total": "5", "borrowed": "2"}]},
        {"name": "spot", "resources": [{"name": "cpu", "total": "0", "borrowed": "0"}]},
    ]
    assert flavor_usage(None, {("spot", "cpu"): 1500}, borrowed=False) == [
        {"name": "spot", "resources": [{"name": "cpu", "total": "1500m"}]}
    ]


# -- kept incrementally: equal to a full count after any sequence of events

NAMESPACES = ("ns", "other")
QUEUES = ("lq", "lq2")
NAMES = ("w1", "w2", "w3", "w4")
STATES = ("new", "evaluating", "parked", "reserved", "admitted", "finished", "finished-pending")


def workload_in(
    state: str, name: str, namespace: str, queue: str, cq: str, active: bool, reclaimable: int
) -> Obj:
    obj = wl(
        name,
        reserved=state in ("reserved", "admitted", "finished"),
        admitted=state in ("admitted", "finished"),
        finished=state.startswith("finished"),
        pending_reason={"evaluating": "", "parked": "WaitingForQuota"}.get(state),
        reclaimable=reclaimable,
    )
    obj["metadata"]["namespace"] = namespace
    obj["spec"] = {"queueName": queue, "active": active}
    if "admission" in obj["status"]:
        obj["status"]["admission"]["clusterQueue"] = cq
    return obj


events = st.lists(
    st.one_of(
        st.tuples(
            st.just("workload"),
            st.sampled_from(STATES),
            st.sampled_from(NAMES),
            st.sampled_from(NAMESPACES),
            st.sampled_from(QUEUES),
            st.sampled_from(["cq", "cq2"]),
            st.booleans(),
            st.integers(0, 2),
        ),
        st.tuples(st.just("delete-workload"), st.sampled_from(NAMES), st.sampled_from(NAMESPACES)),
        st.tuples(st.just("local-queue"), st.sampled_from(NAMESPACES), st.sampled_from(QUEUES),
                  st.sampled_from(["cq", "cq2"])),
        st.tuples(st.just("delete-local-queue"), st.sampled_from(NAMESPACES), st.sampled_from(QUEUES)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(events)
def test_incremental_stats_equal_a_full_count_at_every_step(steps: list[tuple[Any, ...]]) -> None:
    workloads: dict[tuple[str, str], Obj] = {}
    local_queues: dict[tuple[str, str], Obj] = {}
    stats = IncrementalStats(lambda ns, name: local_queues.get((ns, name)),
                             lambda ns, name: workloads.get((ns, name)))
    for step in steps:
        match step:
            case ("workload", state, name, namespace, queue, cq, active, reclaimable):
                obj = workload_in(state, name, namespace, queue, cq, active, reclaimable)
                workloads[(namespace, name)] = obj
                stats.workload_changed(obj)
            case ("delete-workload", name, namespace):
                if workloads.pop((namespace, name), None) is not None:
                    stats.workload_deleted(namespace, name)
            case ("local-queue", namespace, name, cq):
                local_queues[(namespace, name)] = {"metadata": {"name": name, "namespace": namespace},
                                                   "spec": {"clusterQueue": cq}}
                stats.local_queue_changed(namespace, name)
            case ("delete-local-queue", namespace, name):
                if local_queues.pop((namespace, name), None) is not None:
                    stats.local_queue_changed(namespace, name)
        assert stats.stats == compute(workloads.values(), local_queues)
