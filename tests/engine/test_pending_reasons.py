"""Every waiting workload is told why it waits, once per reason and message (issue 13).

Workloads of one scheduling shape share a bucket and are parked together when its first does not
fit; each of them is still told the reason, as Kueue's scheduler tells every head it evaluates.
"""

from __future__ import annotations

from typing import Any

from kadmit.engine import Engine

from .conftest import (
    T0,
    admitted_names,
    cluster_queue,
    flavor,
    load,
    local_queue,
    pending_by_name,
    quotas,
    workload,
)

NO_ROOM = (
    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor f, 1 more needed"
)


def fits_two() -> Engine:
    return load(flavor("f"), cluster_queue("cq", quotas({"f": {"cpu": 2}})), local_queue("lq", "cq"))


def test_every_workload_of_a_parked_shape_is_told_why_it_waits() -> None:
    engine = fits_two()
    for i in range(10):
        engine.upsert_workload(workload(f"w{i}", created=i))
    decisions = engine.schedule(T0 + 10)
    assert admitted_names(decisions) == ["w0", "w1"]
    pending = pending_by_name(decisions)
    assert sorted(pending) == [f"w{i}" for i in range(2, 10)]
    assert set(pending.values()) == {("WaitingForQuota", NO_ROOM)}
    assert [c["reason"] for p in decisions.pending for c in p.conditions] == ["WaitingForQuota"] * 8


def test_nothing_is_told_again_when_nothing_changed() -> None:
    engine = fits_two()
    for i in range(5):
        engine.upsert_workload(workload(f"w{i}", created=i))
    engine.schedule(T0 + 10)
    # Another workload's arrival of another shape wakes nothing of this bucket
    engine.upsert_workload(workload("other", created=20, cpu="3"))
    decisions = engine.schedule(T0 + 11)
    assert sorted(pending_by_name(decisions)) == ["other"]
    assert engine.schedule(T0 + 12).pending == []


def test_a_workload_joining_a_parked_shape_is_told_at_the_next_cycle() -> None:
    engine = fits_two()
    for i in range(3):
        engine.upsert_workload(workload(f"w{i}", created=i))
    engine.schedule(T0 + 10)
    engine.upsert_workload(workload("late", created=30))
    assert pending_by_name(engine.schedule(T0 + 11)) == {"late": ("WaitingForQuota", NO_ROOM)}


def test_a_new_message_is_told_to_every_waiting_workload() -> None:
    engine = load(flavor("f"), cluster_queue("cq", quotas({"f": {"cpu": 3}})), local_queue("lq", "cq"))
    for i in range(4):
        engine.upsert_workload(workload(f"w{i}", created=i, cpu="2"))
    decisions = engine.schedule(T0 + 10)
    assert admitted_names(decisions) == ["w0"]
    assert set(pending_by_name(decisions).values()) == {("WaitingForQuota", NO_ROOM)}
    engine.upsert_workload(workload("small", created=20))  # takes the last cpu
    assert admitted_names(engine.schedule(T0 + 11)) == ["small"]
    engine.delete_workload("default", "w0")
    decisions = engine.schedule(T0 + 12)
    assert admitted_names(decisions) == ["w1"]
    assert pending_by_name(decisions) == dict.fromkeys(
        ["w2", "w3"], ("WaitingForQuota", NO_ROOM.replace("1 more", "2 more"))
    )


def test_namespace_mismatch_is_told_in_every_namespace_and_parks_no_other() -> None:
    engine = load(
        flavor("f"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"team": "a"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "y", "labels": {}}},
        cluster_queue("cq", quotas({"f": {"cpu": 4}}), namespaceSelector={"matchLabels": {"team": "a"}}),
        local_queue("lq", "cq", namespace="x"),
        local_queue("lq", "cq", namespace="y"),
        local_queue("lq", "cq", namespace="team"),
    )
    engine.upsert_workload(workload("a", namespace="x", created=0))
    engine.upsert_workload(workload("b", namespace="y", created=1))
    engine.upsert_workload(workload("c", namespace="team", created=2))  # the same shape, selected
    decisions = engine.schedule(T0 + 5)
    assert admitted_names(decisions) == ["c"]
    mismatch = ("Misconfigured", "workload namespace doesn't match ClusterQueue selector")
    assert pending_by_name(decisions) == {"a": mismatch, "b": mismatch}
    engine.upsert_workload(workload("a2", namespace="x", created=3))
    assert pending_by_name(engine.schedule(T0 + 6)) == {"a2": mismatch}


def test_a_held_local_queue_tells_a_new_workload_it_is_inactive() -> None:
    engine = load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 1}})),
        local_queue("lq", "cq", stopPolicy="Hold"),
    )
    engine.upsert_workload(workload("w"))
    assert pending_by_name(engine.schedule(T0)) == {"w": ("Suspended", "LocalQueue lq is inactive")}


def _containers(
    *resources: dict[str, dict[str, str]], init: bool = False, name: str = "main"
) -> dict[str, Any]:
    """A pod set whose containers (or init containers) carry these ``resources``."""
    key = "initContainers" if init else "containers"
    listed = [{"name": f"c{i}", "image": "busybox", "resources": r} for i, r in enumerate(resources)]
    spec: dict[str, Any] = {key: listed}
    if init:
        spec["containers"] = [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]
    return {"name": name, "count": 1, "template": {"spec": spec}}


def test_requests_above_limits_leave_the_workload_misconfigured_in_kueues_words() -> None:
    # Kueue's ValidateResources: the Workload is not rejected, it stays pending (Misconfigured),
    # each container requesting more than its limit named, its resources sorted.
    engine = fits_two()
    over = {"requests": {"memory": "2Gi", "cpu": "2"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    engine.upsert_workload(workload("one", pod_sets=[_containers(over)]))
    engine.upsert_workload(
        workload(
            "two",
            created=1,
            pod_sets=[
                _containers({"requests": {"cpu": "1"}}, over),
                _containers(over, init=True, name="setup"),
            ],
        )
    )
    engine.upsert_workload(workload("fine", created=2))
    decisions = engine.schedule(T0 + 10)
    assert admitted_names(decisions) == ["fine"]
    pending = pending_by_name(decisions)
    one = (
        'spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu","memory"]: '
        "requests must not exceed its limits"
    )
    assert pending["one"] == ("Misconfigured", f"resources validation failed: {one}")
    assert pending["two"] == (
        "Misconfigured",
        "resources validation failed: ["
        + one.replace("containers[0]", "containers[1]")
        + ", "
        + one.replace("podSets[0]", "podSets[1]").replace("containers[0]", "initContainers[0]")
        + "]",
    )
    # Told once; fixed, it is admitted.
    assert "one" not in pending_by_name(engine.schedule(T0 + 11))
    fixed = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    engine.upsert_workload(workload("one", pod_sets=[_containers(fixed)]))
    assert admitted_names(engine.schedule(T0 + 12)) == ["one"]


def test_invalid_init_containers_are_named_before_the_containers() -> None:
    # As Kueue's ValidateResources walks a pod spec.
    engine = fits_two()
    over = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
    both = _containers(over, init=True)
    both["template"]["spec"]["containers"][0]["resources"] = over
    engine.upsert_workload(workload("both", pod_sets=[both]))
    path = "spec.podSets[0].template.spec"
    why = 'Invalid value: ["cpu"]: requests must not exceed its limits'
    assert pending_by_name(engine.schedule(T0)) == {
        "both": (
            "Misconfigured",
            f"resources validation failed: [{path}.initContainers[0]: {why}, {path}.containers[0]: {why}]",
        )
    }
