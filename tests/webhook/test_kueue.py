"""The Kueue kinds' webhooks over HTTPS: Kueue's samples pass, Kueue's rules deny with Kueue's words."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from kadmit.engine import Engine
from kadmit.webhook.kueue import KINDS, KueueWebhooks
from tests.webhook.conftest import review

EXAMPLES = Path("/work/shared/kueue-examples")


def samples() -> list[dict[str, Any]]:
    documents = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") in KINDS:
                documents.append(document)
    return documents


def path_of(kind: str, mutating: bool) -> str:
    return f"/{'mutate' if mutating else 'validate'}-kueue-x-k8s-io-v1beta2-{KINDS[kind][0]}"


async def send(server: Any, obj: dict[str, Any], *, mutating: bool, old: dict[str, Any] | None = None) -> Any:
    kind = obj["kind"]
    body = review(
        obj,
        old=old,
        operation="UPDATE" if old else "CREATE",
        group="kueue.x-k8s.io",
        version="v1beta2",
        kind=kind,
        namespace=obj["metadata"].get("namespace", ""),
    )
    async with await server.post(path_of(kind, mutating), body) as resp:
        assert resp.status == 200
        response = (await resp.json())["response"]
    assert response["uid"] == body["request"]["uid"]
    return response


async def admit(server: Any, obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """Mutate (on create) then validate, as the API server does; returns the stored object."""
    if old is None:
        response = await send(server, obj, mutating=True)
        assert response["allowed"], response
        if "patch" in response:
            obj = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
    response = await send(server, obj, mutating=False, old=old)
    assert response["allowed"], response
    return obj


async def denial(server: Any, obj: dict[str, Any], old: dict[str, Any] | None = None) -> str:
    response = await send(server, obj, mutating=False, old=old)
    assert response["allowed"] is False, response
    return str(response["status"]["message"])


@pytest.fixture
async def server(serve: Any) -> Any:
    return await serve(KueueWebhooks().webhooks())


async def test_every_kueue_sample_is_admitted(server: Any) -> None:
    documents = samples()
    assert {d["kind"] for d in documents} >= {
        "ClusterQueue",
        "LocalQueue",
        "ResourceFlavor",
        "AdmissionCheck",
    }
    for document in documents:
        stored = await admit(server, copy.deepcopy(document))
        if document["kind"] in ("ClusterQueue", "ResourceFlavor"):
            assert stored["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]


def cluster_queue(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "on-demand",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "10"},
                            {"name": "memory", "nominalQuota": "10Gi"},
                        ],
                    },
                    {
                        "name": "spot",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "5"},
                            {"name": "memory", "nominalQuota": "5Gi"},
                        ],
                    },
                ],
            }
        ],
    }
    base.update(spec)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": base,
    }


async def test_cluster_queue_limits_need_a_cohort(server: Any) -> None:
    cq = cluster_queue()
    cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]["lendingLimit"] = "20"
    # Kueue reports both problems at once.
    assert await denial(server, cq) == (
        '[spec.resourceGroups[0].flavors[1].resources[0].lendingLimit: Invalid value: "20": '
        "must be nil when cohort is empty, "
        'spec.resourceGroups[0].flavors[1].resources[0].lendingLimit: Invalid value: "20": '
        "must be less than or equal to the nominalQuota]"
    )
    cq["spec"]["cohortName"] = "all"
    assert await denial(server, cq) == (
        'spec.resourceGroups[0].flavors[1].resources[0].lendingLimit: Invalid value: "20": '
        "must be less than or equal to the nominalQuota"
    )
    cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]["lendingLimit"] = "5"
    cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]["borrowingLimit"] = "1"
    await admit(server, cq)


async def test_cluster_queue_duplicates_and_order(server: Any) -> None:
    cq = cluster_queue()
    cq["spec"]["resourceGroups"].append(copy.deepcopy(cq["spec"]["resourceGroups"][0]))
    cq["spec"]["resourceGroups"][1]["coveredResources"] = ["memory", "gpu"]
    cq["spec"]["resourceGroups"][1]["flavors"] = [cq["spec"]["resourceGroups"][1]["flavors"][0]]
    message = await denial(server, cq)
    assert 'spec.resourceGroups[1].coveredResources[0]: Duplicate value: "memory"' in message
    assert 'spec.resourceGroups[1].flavors[0].name: Duplicate value: "on-demand"' in message
    assert (
        'spec.resourceGroups[1].flavors[0].resources[0].name: Invalid value: "cpu": '
        "must match the name in coveredResources" in message
    )
    assert message.startswith("[") and message.endswith("]")


async def test_cluster_queue_resource_count_and_negative_quota(server: Any) -> None:
    cq = cluster_queue()
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] = [{"name": "cpu", "nominalQuota": "-1"}]
    message = await denial(server, cq)
    assert (
        "spec.resourceGroups[0].flavors[0].resources: Invalid value: "
        "must have the same number of resources as the coveredResources" in message
    )
    assert (
        'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-1": '
        "must be greater than or equal to 0" in message
    )


async def test_cluster_queue_preemption_fungibility_and_weight(server: Any) -> None:
    cq = cluster_queue(
        preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
    )
    assert "spec.preemption: Invalid value: " in (message := await denial(server, cq))
    assert message.endswith("reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    cq = cluster_queue(
        flavorFungibility={"whenCanBorrow": "MayStopSearch", "preference": "BorrowingOverPreemption"}
    )
    assert (await denial(server, cq)).startswith(
        'spec.flavorFungibility.preference: Invalid value: "BorrowingOverPreemption"'
    )
    cq = cluster_queue(
        flavorFungibility={
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "TryNextFlavor",
            "preference": "BorrowingOverPreemption",
        }
    )
    await admit(server, cq)
    cq = cluster_queue(fairSharing={"weight": "1n"})
    assert (
        await denial(server, cq)
        == 'spec.fairSharing: Invalid value: "1n": When not 0, weight must be > 10e-9'
    )
    await admit(server, cluster_queue(fairSharing={"weight": "0"}))


async def test_cluster_queue_limits_on_groups(server: Any) -> None:
    group = cluster_queue()["spec"]["resourceGroups"][0]
    groups = []
    for i in range(17):
        g = copy.deepcopy(group)
        g["coveredResources"] = [f"r{i}"]
        g["flavors"] = [{"name": f"f{i}", "resources": [{"name": f"r{i}", "nominalQuota": "1"}]}]
        groups.append(g)
    assert "spec.resourceGroups: Too many: 17: must have at most 16 items" in await denial(
        server, cluster_queue(resourceGroups=groups)
    )


async def test_on_flavors_must_be_flavors_of_the_cluster_queue(server: Any) -> None:
    strategy = {"admissionChecks": [{"name": "prov", "onFlavors": ["spot", "gpu"]}]}
    cq = cluster_queue(admissionChecksStrategy=strategy)
    assert await denial(server, cq) == (
        'spec.admissionChecksStrategy.admissionChecks[0].onFlavors[1]: Unsupported value: "gpu": '
        'supported values: "on-demand", "spot"'
    )
    # On update, an entry that did not change is tolerated (the flavor may have been removed since).
    updated = copy.deepcopy(cq)
    updated["spec"]["stopPolicy"] = "Hold"
    response = await send(server, updated, mutating=False, old=cq)
    assert response["allowed"] is True
    assert response["warnings"] == [
        "kadmit cannot schedule with this ClusterQueue until this is fixed: "
        "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[1]: "
        "'gpu' is not a flavor of this ClusterQueue"
    ]


async def test_cohort_limits_need_a_parent_and_are_not_capped(server: Any) -> None:
    cohort: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "team"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {
                            "name": "f",
                            "resources": [{"name": "cpu", "nominalQuota": "1", "lendingLimit": "5"}],
                        }
                    ],
                }
            ]
        },
    }
    assert await denial(server, cohort) == (
        'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "5": '
        "must be nil when parent is empty"
    )
    cohort["spec"]["parentName"] = "org"
    await admit(server, cohort)


async def test_resource_flavor_rules(server: Any) -> None:
    flavor: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "spot"},
        "spec": {
            "nodeLabels": {"bad key!": "x"},
            "nodeTaints": [
                {"key": "spot", "value": "true", "effect": "NoSchedule"},
                {"key": "spot", "value": "false", "effect": "NoSchedule"},
            ],
            "tolerations": [
                {"operator": "Equal", "value": "x"},
                {"key": "a", "operator": "Exists", "value": "v"},
            ],
        },
    }
    message = await denial(server, flavor)
    assert (
        'spec.nodeLabels: Invalid value: "bad key!": name part must consist of alphanumeric characters'
        in message
    )
    assert (
        "spec.nodeTaints[1]: Duplicate value: " in message
        and "taints must be unique by key and effect pair" in message
    )
    assert (
        'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty'
        in message
    )
    assert "value must be empty when `operator` is 'Exists'" in message


async def test_immutable_fields(server: Any) -> None:
    queue: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": "ns"},
        "spec": {"clusterQueue": "a"},
    }
    moved = copy.deepcopy(queue)
    moved["spec"]["clusterQueue"] = "b"
    assert (
        await denial(server, moved, old=queue) == 'spec.clusterQueue: Invalid value: "b": field is immutable'
    )
    check: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "c"},
        "spec": {"controllerName": "a/b"},
    }
    changed = copy.deepcopy(check)
    changed["spec"]["controllerName"] = "x/y"
    # Kueue reports the old value (it passes the fields to ValidateImmutableField the other way round).
    assert (
        await denial(server, changed, old=check)
        == 'spec.controllerName: Invalid value: "a/b": field is immutable'
    )
    check["spec"]["parameters"] = {
        "apiGroup": "kueue.x-k8s.io",
        "kind": "ProvisioningRequestConfig",
        "name": "Bad",
    }
    assert (await denial(server, check)).startswith(
        'spec.parameters.name: Invalid value: "Bad": should match: a lowercase RFC 1123 label must consist of'
    )
    check["spec"]["parameters"]["name"] = "prc"
    await admit(server, check)
    wpc: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high"},
    }
    assert await denial(server, wpc) == "value: Required value"
    wpc["value"] = 1000
    await admit(server, wpc)


def workload(**status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-x-12345", "namespace": "default"},
        "spec": {
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                    },
                }
            ],
        },
    }
    if status:
        obj["status"] = status
    return obj


RESERVED: list[dict[str, Any]] = [
    {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
]
ADMISSION: dict[str, Any] = {
    "clusterQueue": "cq",
    "podSetAssignments": [
        {"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "2"}, "count": 2}
    ],
}


async def test_workload_defaults_and_reserved_key(server: Any) -> None:
    wl = workload()
    del wl["spec"]["podSets"][0]["name"]
    del wl["spec"]["podSets"][0]["count"]
    stored = await admit(server, wl)
    assert stored["spec"]["podSets"][0]["name"] == "main" and stored["spec"]["podSets"][0]["count"] == 1
    bad = workload()
    bad["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["pods"] = "1"
    assert await denial(server, bad) == (
        'spec.podSets[0].template.spec.containers[0].resources.requests[pods]: Invalid value: "pods": '
        "the key is reserved for internal kueue use"
    )


async def test_a_reserved_pod_set_may_shrink(server: Any) -> None:
    """Kueue's ``validateImmutablePodSet`` (ElasticJobsViaWorkloadSlices): only the count may
    change while reserved, and only down."""
    old = workload(conditions=RESERVED, admission=ADMISSION)
    shrunk = copy.deepcopy(old)
    shrunk["spec"]["podSets"][0]["count"] = 1
    await admit(server, shrunk, old=old)
    shrunk["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["image"] = "other"
    assert await denial(server, shrunk, old=old) == "spec.podSets.0: Invalid value: field is immutable"


async def test_workload_is_frozen_while_reserved(server: Any) -> None:
    old = workload(conditions=RESERVED, admission=ADMISSION)
    await admit(server, old, old=old)
    grown = copy.deepcopy(old)
    grown["spec"]["podSets"][0]["count"] = 3
    assert await denial(server, grown, old=old) == "spec.podSets.0: Invalid value: field is immutable"
    requeued = copy.deepcopy(old)
    requeued["spec"]["queueName"] = "other"
    assert (
        await denial(server, requeued, old=old)
        == 'spec.queueName: Invalid value: "other": field is immutable'
    )
    readmitted = copy.deepcopy(old)
    readmitted["status"]["admission"] = {**ADMISSION, "clusterQueue": "other"}
    assert await denial(server, readmitted, old=old) == "status.admission: Invalid value: field is immutable"
    missing = workload(conditions=RESERVED)
    assert "status.admission: Required value" in await denial(server, missing)
    assignment = {**ADMISSION["podSetAssignments"][0], "resourceUsage": {"cpu": "3", "memory": "3"}}
    uneven = workload(conditions=RESERVED, admission={**ADMISSION, "podSetAssignments": [assignment]})
    # CPU counts in milli-units (1500m per pod is fine), memory in bytes, as Kueue's ResourceValue.
    assert await denial(server, uneven) == (
        "status.admission.podSetAssignments[0].resourceUsage[memory]: Invalid value: 3: "
        "is not a multiple of 2"
    )


async def test_ready_check_pod_set_updates_are_immutable(server: Any) -> None:
    check: dict[str, Any] = {
        "name": "prov",
        "state": "Ready",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "podSetUpdates": [{"name": "main", "nodeSelector": {"zone": "a"}}],
    }
    old = workload(conditions=RESERVED, admission=ADMISSION, admissionChecks=[check])
    await admit(server, old, old=old)
    changed = copy.deepcopy(old)
    changed["status"]["admissionChecks"][0]["podSetUpdates"][0]["nodeSelector"] = {"zone": "b"}
    assert await denial(server, changed, old=old) == (
        "status.admissionChecks[0].podSetUpdates: Invalid value: field is immutable"
    )
    unknown = copy.deepcopy(old)
    unknown["status"]["admissionChecks"][0]["podSetUpdates"][0]["name"] = "workers"
    assert 'status.admissionChecks[0].podSetUpdates[0].name: Unsupported value: "workers"' in await denial(
        server, unknown, old=old
    )


async def test_engine_refusals_are_denials(server: Any) -> None:
    wl = workload()
    wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    message = await denial(server, wl)
    assert "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]" in message


async def test_reclaimable_pods_only_grow_while_reserved(server: Any) -> None:
    old = workload(conditions=RESERVED, admission=ADMISSION, reclaimablePods=[{"name": "main", "count": 1}])
    await admit(server, old, old=old)
    fewer = copy.deepcopy(old)
    fewer["status"]["reclaimablePods"][0]["count"] = 0
    assert await denial(server, fewer, old=old) == (
        "status.reclaimablePods[main].count: Invalid value: 0: cannot be less then 1"
    )
    gone = copy.deepcopy(old)
    gone["status"]["reclaimablePods"] = []
    assert (
        await denial(server, gone, old=old)
        == "status.reclaimablePods[main]: Required value: cannot be removed"
    )
    too_many = copy.deepcopy(old)
    too_many["status"]["reclaimablePods"][0]["count"] = 5
    assert await denial(server, too_many, old=old) == (
        "status.reclaimablePods[main].count: Invalid value: 5: should be less or equal to 2"
    )
    more = copy.deepcopy(old)
    more["status"]["reclaimablePods"][0]["count"] = 2
    await admit(server, more, old=old)


async def test_cluster_name_must_be_nominated_only_with_the_incremental_dispatcher(serve: Any) -> None:
    old = workload(conditions=RESERVED, admission=ADMISSION, nominatedClusterNames=["w1", "w2"])
    chosen = copy.deepcopy(old)
    chosen["status"]["clusterName"] = "w3"
    default = await serve(KueueWebhooks().webhooks())
    await admit(default, chosen, old=old)  # all-at-once (the default) nominates nothing to check against
    incremental = await serve(KueueWebhooks(incremental_dispatch=True).webhooks())
    assert await denial(incremental, chosen, old=old) == (
        'status.clusterName: Invalid value: "w3": '
        "when setting clusterName it must be one of the nominatedClusterNames"
    )
    chosen["status"]["clusterName"] = "w2"
    await admit(incremental, chosen, old=old)


async def test_a_new_elastic_slice_takes_the_worker_of_the_slice_it_replaces(serve: Any) -> None:
    """Kueue's ``validateClusterNameUpdate``: a slice replacing another may get a clusterName it
    was not nominated for (MultiKueue sends it where its job runs), even with the incremental
    dispatcher; any other Workload may not."""
    old = workload(conditions=RESERVED, admission=ADMISSION, nominatedClusterNames=["w1"])
    old["metadata"]["annotations"] = {
        "kueue.x-k8s.io/elastic-job": "true",
        "kueue.x-k8s.io/workload-slice-replacement-for": "default/job-a-1",
    }
    placed = copy.deepcopy(old)
    placed["status"]["clusterName"] = "w2"
    incremental = await serve(KueueWebhooks(incremental_dispatch=True).webhooks())
    await admit(incremental, placed, old=old)
    del old["metadata"]["annotations"]["kueue.x-k8s.io/workload-slice-replacement-for"]
    del placed["metadata"]["annotations"]["kueue.x-k8s.io/workload-slice-replacement-for"]
    assert await denial(incremental, placed, old=old) == (
        'status.clusterName: Invalid value: "w2": '
        "when setting clusterName it must be one of the nominatedClusterNames"
    )


async def test_cluster_queue_totals_and_concurrent_admission_policy(server: Any) -> None:
    flavors = [
        {
            "name": f"f{i}",
            "resources": [{"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "1"}],
        }
        for i in range(257)
    ]
    wide = cluster_queue(resourceGroups=[{"coveredResources": ["cpu", "memory"], "flavors": flavors}])
    message = await denial(server, wide)
    assert (
        "spec.resourceGroups: Invalid value: 257: "
        "total number of flavors across all resourceGroups must be ≤ 256, got 257" in message
    )
    assert (
        "spec.resourceGroups[0]: Invalid value: 514: "
        "number of flavor-resource combinations in a resourceGroup must be ≤ 512, got 514" in message
    )
    old = cluster_queue(concurrentAdmissionPolicy={"mode": "Enabled"})
    changed = cluster_queue()
    assert (
        await denial(server, changed, old=old)
        == "spec.concurrentAdmissionPolicy: Invalid value: field is immutable"
    )


async def test_unchanged_on_flavors_are_no_longer_tolerated_once_the_flavors_change(server: Any) -> None:
    strategy = {"admissionChecks": [{"name": "prov", "onFlavors": ["gone"]}]}
    old = cluster_queue(admissionChecksStrategy=strategy)
    fewer = cluster_queue(admissionChecksStrategy=strategy)
    fewer["spec"]["resourceGroups"][0]["flavors"].pop()
    assert (await denial(server, fewer, old=old)).startswith(
        'spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]: Unsupported value: "gone"'
    )


async def test_a_status_review_takes_the_pod_sets_from_the_engines_reading(serve: Any) -> None:
    """kadmit's webhook asks the engine for its reading of a Workload on a status update with the
    spec unchanged (the reader checks uid and generation) and never on a changed spec: a spec
    that differs is read afresh even under the same generation, so the engine's reading of the
    valid one never vouches for it."""
    engine = Engine()
    stored = workload()
    stored["metadata"].update(uid="3f0c8a52-0000-4000-8000-000000000002", generation=1)
    engine.upsert_workload(stored)
    asked: list[tuple[str, str]] = []

    def known(namespace: str, name: str) -> Any:
        asked.append((namespace, name))
        return engine.workload(namespace, name)

    server = await serve(KueueWebhooks(known_workload=known).webhooks())
    reserved = copy.deepcopy(stored)
    reserved["status"] = {"conditions": RESERVED, "admission": ADMISSION}
    await admit(server, reserved, old=stored)
    meta = stored["metadata"]
    assert asked == [(meta["namespace"], meta["name"])]
    assert engine.workload(meta["namespace"], meta["name"]) is not None
    broken = copy.deepcopy(stored)  # Kueue's rules let this count through; the engine's reader does not
    broken["spec"]["podSets"][0]["count"] = "3"
    message = await denial(server, broken, old=stored)
    assert message == "spec.podSets[0].count: must be an integer, not '3'", message
    assert len(asked) == 1  # the changed spec was not taken from the engine
    assert engine.workload(meta["namespace"], "no-such-workload") is None
