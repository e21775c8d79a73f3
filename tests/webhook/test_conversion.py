"""v1beta1 ⇄ v1beta2 through ``/convert`` over HTTPS, and lossless round trips where Kueue is lossless."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kadmit.webhook.conversion import (
    V1BETA1,
    V1BETA2,
    convert,
    handle_conversion_review,
    topology_down,
    topology_up,
)


def conversion_review(objects: list[Any], desired: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": str(uuid.uuid4()), "desiredAPIVersion": desired, "objects": objects},
    }


async def start(serve: Any) -> Any:
    return await serve([], extra={"/convert": handle_conversion_review})


V1BETA1_CQ = {
    "apiVersion": V1BETA1,
    "kind": "ClusterQueue",
    "metadata": {"name": "cq"},
    "spec": {
        "cohort": "team",
        "admissionChecks": ["prov", "mk"],
        "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
        "resourceGroups": [],
    },
    "status": {"pendingWorkloadsStatus": {"head": []}, "pendingWorkloads": 1},
}


async def test_cluster_queue_up_over_https(serve: Any) -> None:
    server = await start(serve)
    body = conversion_review([V1BETA1_CQ], V1BETA2)
    async with await server.post("/convert", body) as resp:
        assert resp.status == 200
        answer = await resp.json()
    assert answer["kind"] == "ConversionReview"
    response = answer["response"]
    assert response["uid"] == body["request"]["uid"]
    assert response["result"] == {"status": "Success"}
    (cq,) = response["convertedObjects"]
    assert cq["apiVersion"] == V1BETA2
    assert cq["spec"] == {
        "cohortName": "team",
        "admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}, {"name": "mk"}]},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
        "resourceGroups": [],
    }
    assert cq["status"] == {"pendingWorkloads": 1}


async def test_bad_reviews_are_400_and_bad_objects_fail_the_review(serve: Any) -> None:
    server = await start(serve)
    async with await server.post("/convert", {"apiVersion": "v1", "kind": "ConversionReview"}) as resp:
        assert resp.status == 400
        assert (await resp.text()).startswith("expected an apiextensions.k8s.io/v1 ConversionReview")
    wrong = dict(V1BETA1_CQ, kind="Pod")
    async with await server.post("/convert", conversion_review([wrong], V1BETA2)) as resp:
        assert resp.status == 200
        response = (await resp.json())["response"]
    assert response["result"] == {"status": "Failure", "message": "kind 'Pod' has no conversion"}
    async with await server.post("/convert", conversion_review([V1BETA1_CQ], "kueue.x-k8s.io/v1")) as resp:
        assert (await resp.json())["response"]["result"]["status"] == "Failure"


def test_v1beta2_objects_round_trip_through_v1beta1() -> None:
    objects = [
        {
            "apiVersion": V1BETA2,
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "cohortName": "a",
                "admissionChecksStrategy": {"admissionChecks": [{"name": "x", "onFlavors": ["f"]}]},
            },
        },
        {
            "apiVersion": V1BETA2,
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "n"},
            "spec": {"clusterQueue": "cq"},
            "status": {"flavorsUsage": [{"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]},
        },
        {
            "apiVersion": V1BETA2,
            "kind": "Workload",
            "metadata": {"name": "w", "namespace": "n"},
            "spec": {
                "priorityClassRef": {
                    "group": "kueue.x-k8s.io",
                    "kind": "WorkloadPriorityClass",
                    "name": "high",
                },
                "priority": 100,
                "podSets": [{"name": "main", "count": 4, "template": {"spec": {"containers": []}}}],
            },
            "status": {
                "accumulatedPastExecutionTimeSeconds": 30,
                "admission": {
                    "clusterQueue": "cq",
                    "podSetAssignments": [
                        {
                            "name": "main",
                            "count": 4,
                            "topologyAssignment": {
                                "levels": ["block", "rack"],
                                "slices": [
                                    {
                                        "domainCount": 2,
                                        "valuesPerLevel": [
                                            {"universal": "block-1"},
                                            {"individual": {"prefix": "rack-", "roots": ["1", "2"]}},
                                        ],
                                        "podCounts": {"individual": [3, 1]},
                                    }
                                ],
                            },
                        }
                    ],
                },
            },
        },
        {
            "apiVersion": V1BETA2,
            "kind": "MultiKueueCluster",
            "metadata": {"name": "w1"},
            "spec": {"clusterSource": {"kubeConfig": {"location": "s", "locationType": "Secret"}}},
        },
        {"apiVersion": V1BETA2, "kind": "Cohort", "metadata": {"name": "c"}, "spec": {"parentName": "p"}},
    ]
    for obj in objects:
        down = convert(obj, V1BETA1)
        assert down["apiVersion"] == V1BETA1
        assert convert(down, V1BETA2) == obj, obj["kind"]


def test_v1beta1_shapes() -> None:
    workload = {
        "apiVersion": V1BETA1,
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {
            "priorityClassSource": "scheduling.k8s.io/priorityclass",
            "priorityClassName": "p",
            "podSets": [],
        },
        "status": {"accumulatedPastExexcutionTimeSeconds": 5},
    }
    up = convert(workload, V1BETA2)
    assert up["spec"] == {
        "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "p"},
        "podSets": [],
    }
    assert up["status"] == {"accumulatedPastExecutionTimeSeconds": 5}
    assert convert(up, V1BETA1) == workload
    cluster = {
        "apiVersion": V1BETA1,
        "kind": "MultiKueueCluster",
        "metadata": {"name": "w"},
        "spec": {"kubeConfig": {"location": "s"}},
    }
    assert convert(cluster, V1BETA2)["spec"] == {"clusterSource": {"kubeConfig": {"location": "s"}}}
    assert convert(convert(cluster, V1BETA2), V1BETA1) == cluster
    queue = {
        "apiVersion": V1BETA1,
        "kind": "LocalQueue",
        "metadata": {"name": "q"},
        "status": {"flavorUsage": [], "flavors": []},
    }
    assert convert(queue, V1BETA2)["status"] == {"flavorsUsage": []}
    check = {
        "apiVersion": V1BETA1,
        "kind": "AdmissionCheck",
        "metadata": {"name": "a"},
        "spec": {"controllerName": "c", "retryDelayMinutes": 15},
    }
    assert convert(check, V1BETA2)["spec"] == {"controllerName": "c"}
    # Fields that exist only in v1beta2 are dropped on the way down, as Kueue drops them.
    gated = copy.deepcopy(up)
    gated["spec"]["preemptionGates"] = [{"name": "g"}]
    assert "preemptionGates" not in convert(gated, V1BETA1)["spec"]


names = st.text(alphabet="abc-01", min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda levels: st.tuples(
            st.just([f"level-{i}" for i in range(levels)]),
            st.lists(
                st.tuples(st.lists(names, min_size=levels, max_size=levels), st.integers(1, 5)),
                min_size=0,
                max_size=8,
            ),
        )
    )
)
def test_topology_assignment_round_trips_losslessly(
    case: tuple[list[str], list[tuple[list[str], int]]],
) -> None:
    levels, domains = case
    v1beta1 = {"levels": levels, "domains": [{"values": values, "count": count} for values, count in domains]}
    v1beta2 = topology_up(v1beta1)
    assert topology_down(v1beta2) == v1beta1
    if domains:
        assert v1beta2["slices"][0]["domainCount"] == len(domains)
