"""The Workload slices of an elastic job as Kueue's ``workloadslicing`` and ``ElasticJobUngater``
keep them: which slice the job goes on with, which are finished, which pods are ungated."""

from __future__ import annotations

from typing import Any

from kadmit.controller.jobs import slices as sl

Obj = dict[str, Any]
GATE = {"name": "kueue.x-k8s.io/elastic-job"}


def _slice(name: str, second: int, count: int, *conditions: str, replaces: str | None = None) -> Obj:
    annotations = {"kueue.x-k8s.io/workload-slice-replacement-for": f"default/{replaces}"} if replaces else {}
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-01-01T00:00:{second:02d}Z",
            "annotations": annotations,
        },
        "spec": {"podSets": [{"name": "main", "count": count}]},
        "status": {"conditions": [{"type": c, "status": "True"} for c in conditions]},
    }


def _pod(name: str, gated: bool, phase: str = "Running") -> Obj:
    spec: Obj = {"schedulingGates": [GATE]} if gated else {}
    return {
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/podset": "main"}},
        "spec": spec,
        "status": {"phase": phase},
    }


def test_a_pending_replacement_is_selected_and_its_admitted_predecessor_kept() -> None:
    old = _slice("old", 1, 2, "QuotaReserved", "Admitted")
    new = _slice("new", 2, 4, replaces="old")
    result = sl.normalize(sl.not_finished([new, old]))
    assert result.selected is new and result.finish == []
    assert sl.active_slice([old, new]) is old


def test_once_both_are_admitted_the_old_slice_is_finished_as_replaced() -> None:
    old = _slice("old", 1, 2, "QuotaReserved", "Admitted")
    new = _slice("new", 2, 4, "QuotaReserved", "Admitted", replaces="old")
    result = sl.normalize([old, new])
    assert result.selected is new
    assert result.finish == [
        (old, "WorkloadSliceReplaced", "Replaced to accommodate a new workload slice", new)
    ]
    assert sl.active_slice([old, new]) is new
    assert sl.active_slice([new, old]) is new, "made in the same second: the chain, not the order, decides"


def test_a_slice_nothing_replaces_is_out_of_sync() -> None:
    stray = _slice("stray", 1, 2)
    current = _slice("current", 2, 3, "QuotaReserved")
    result = sl.normalize([stray, current])
    assert result.selected is current
    assert result.finish == [
        (stray, "OutOfSync", "The workload slice is out of sync with its parent job", None)
    ]


def test_a_new_slice_names_the_slice_it_replaces_and_the_chain() -> None:
    first = _slice("job-big-aaaaa", 1, 2, "QuotaReserved")
    expected: Obj = {"metadata": {"name": "job-big-bbbbb", "namespace": "default"}, "spec": {}}
    marked = sl.as_slice(expected, [first])["metadata"]["annotations"]
    assert marked == {
        "kueue.x-k8s.io/elastic-job": "true",
        "kueue.x-k8s.io/workload-slice-replacement-for": "default/job-big-aaaaa",
        "kueue.x-k8s.io/workload-slice-name": "job-big-aaaaa",
    }
    alone = sl.as_slice(expected, [])["metadata"]["annotations"]
    assert alone["kueue.x-k8s.io/elastic-job"] == "true"
    assert alone["kueue.x-k8s.io/workload-slice-name"] == "job-big-bbbbb"
    assert "kueue.x-k8s.io/workload-slice-replacement-for" not in alone


def test_scaled_down_means_fewer_somewhere_and_more_nowhere() -> None:
    assert sl.scaled_down({"a": 4, "b": 2}, {"a": 3, "b": 2})
    assert not sl.scaled_down({"a": 4, "b": 2}, {"a": 3, "b": 3})
    assert not sl.scaled_down({"a": 4}, {"a": 4})


def test_pods_are_ungated_up_to_what_the_slice_grants_lowest_names_first() -> None:
    pods = [
        _pod("p-3", gated=True),
        _pod("p-0", gated=False),
        _pod("p-2", gated=True),
        _pod("p-1", gated=True),
        _pod("done", gated=False, phase="Succeeded"),  # ended: counts for nothing
    ]
    chosen = sl.pods_to_ungate(pods, {"main": 3})
    assert [p["metadata"]["name"] for p in chosen] == ["p-1", "p-2"]
    assert sl.pods_to_ungate(pods, {"main": 1}) == []
    pod = _pod("x", gated=True)
    pod["spec"]["schedulingGates"].append({"name": "other"})
    assert sl.ungate(pod) and pod["spec"]["schedulingGates"] == [{"name": "other"}]
    assert not sl.ungate(pod)


def test_a_new_slice_keeps_the_templates_of_the_slice_it_replaces() -> None:
    """The running job's template carries what its start injected; a stop restores the slice's."""
    first = _slice("job-big-aaaaa", 1, 2, "QuotaReserved")
    first["spec"]["podSets"][0]["template"] = {"spec": {"containers": [{"name": "c"}]}}
    injected = {"metadata": {"annotations": {"kueue.x-k8s.io/workload": "job-big-aaaaa"}}, "spec": {}}
    expected: Obj = {
        "metadata": {"name": "job-big-bbbbb", "namespace": "default"},
        "spec": {"podSets": [{"name": "main", "count": 4, "template": injected}], "queueName": "q"},
    }
    made = sl.as_slice(expected, [first])
    assert made["spec"] == {
        "podSets": [{"name": "main", "count": 4, "template": {"spec": {"containers": [{"name": "c"}]}}}],
        "queueName": "q",
    }
