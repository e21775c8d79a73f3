"""A RuntimeClass's pod overhead counts in the quota a Workload needs, as Kueue's
``handlePodOverhead``: a pod naming the RuntimeClass and declaring no overhead has its
``overhead.podFixed``."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.engine import Engine, InvalidObject

from .conftest import T0, cluster_queue, flavor, load, local_queue, pod_set, quotas, workload


def runtime_class(name: str, **pod_fixed: str) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}}
    obj["handler"] = name
    if pod_fixed:
        obj["overhead"] = {"podFixed": pod_fixed}
    return obj


def engine() -> Engine:
    return load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 10, "memory": "10Gi"}})),
        local_queue("lq", "cq"),
    )


def kata(name: str, count: int = 2, **spec: Any) -> dict[str, Any]:
    return workload(name, pod_sets=[pod_set(count, requests={"cpu": "1"}, runtimeClassName="kata", **spec)])


def usage(decisions: Any, name: str) -> dict[str, str]:
    [reservation] = [r for r in decisions.reservations if r.workload[1] == name]
    return dict(reservation.admission["podSetAssignments"][0]["resourceUsage"])


def test_the_runtime_class_overhead_is_counted_for_every_pod() -> None:
    e = engine()
    e.upsert(runtime_class("kata", cpu="250m", memory="160Mi"))
    e.upsert_workload(kata("sandboxed"))
    e.upsert_workload(kata("own", overhead={"cpu": "100m"}))  # its own overhead stands
    e.upsert_workload(workload("plain", pod_sets=[pod_set(2, requests={"cpu": "1"})]))
    decisions = e.schedule(T0)
    assert usage(decisions, "sandboxed") == {"cpu": "2500m", "memory": "320Mi"}
    assert usage(decisions, "own") == {"cpu": "2200m"}
    assert usage(decisions, "plain") == {"cpu": "2"}


def test_a_changed_runtime_class_is_read_by_the_workloads_fed_again() -> None:
    e = engine()
    pending = kata("later", count=9)
    pending["metadata"]["generation"] = 1
    e.upsert(runtime_class("kata", cpu="100m"))
    e.upsert_workload(pending)
    e.upsert(runtime_class("kata", cpu="200m"))  # 9 x 1.2 cpu = 10.8: no longer fits
    e.upsert_workload(pending)
    assert e.schedule(T0).pending[0].reason == "ExceedsMaxQuota"
    e.delete_runtime_class("kata")  # a missing RuntimeClass adds nothing (Kueue logs the error)
    e.upsert_workload(pending)
    assert usage(e.schedule(T0 + 1), "later") == {"cpu": "9"}


def test_an_invalid_overhead_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidObject, match=r"overhead\.podFixed\.cpu"):
        engine().upsert(runtime_class("bad", cpu="lots"))
