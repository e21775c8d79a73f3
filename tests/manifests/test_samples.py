"""Kueue's examples and kadmit's samples validate against the CRDs, and wrong objects do not."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.manifests.conftest import KUEUE_EXAMPLES, MANIFESTS, Validators, load_documents
from tests.manifests.kube_schema import ObjectValidator

SAMPLES = sorted((MANIFESTS / "samples").glob("*.yaml"))
WITH_JOBS = [path for path in SAMPLES if any(d["kind"] == "Job" for d in load_documents(path))]
#: Kinds a sample may hold that are not served by kadmit's CRDs.
BUILTIN = {
    ("batch/v1", "Job"),
    ("v1", "Namespace"),
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
}
VERBATIM = [
    "admin__single-clusterqueue-setup.yaml",
    "admin__resource-flavor-taints.yaml",
    "jobs__sample-job.yaml",
    "jobs__sample-job-partial-admission.yaml",
    "provisioning__provisioning-setup.yaml",
    "multikueue__multikueue-setup.yaml",
]


def validator_for(validators: Validators, doc: dict[str, Any]) -> ObjectValidator:
    return validators[(doc["apiVersion"], doc["kind"])]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_validates(validators: Validators, path: Path) -> None:
    docs = load_documents(path)
    assert docs, f"{path.name} is empty"
    for doc in docs:
        key = (doc["apiVersion"], doc["kind"])
        if key in BUILTIN:
            continue
        assert key in validators, f"{path.name}: {key} is served by no CRD"
        assert validator_for(validators, doc).errors(doc) == [], f"{path.name}: {doc['metadata']['name']}"


@pytest.mark.parametrize("name", VERBATIM)
def test_kueue_examples_are_verbatim_copies(name: str) -> None:
    original = KUEUE_EXAMPLES / name
    if not original.is_file():
        pytest.skip(f"{original} is not beside the repository")
    assert (MANIFESTS / "samples" / name).read_bytes() == original.read_bytes()


def test_single_clusterqueue_sample_has_jobs_for_the_queue() -> None:
    docs = load_documents(MANIFESTS / "samples" / "single-clusterqueue.yaml")
    queues = {d["metadata"]["name"] for d in docs if d["kind"] == "LocalQueue"}
    jobs = [d for d in docs if d["kind"] == "Job"]
    assert len(jobs) >= 2
    assert {j["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] for j in jobs} <= queues
    (cq,) = [d for d in docs if d["kind"] == "ClusterQueue"]
    cpu_quota = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert cpu_quota["name"] == "cpu"

    def cpus(job: dict[str, Any]) -> int:
        request = job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        return int(job["spec"]["parallelism"]) * int(request)

    # Submitted in order, the first fits and together they do not: something admitted, something waits.
    assert cpus(jobs[0]) <= cpu_quota["nominalQuota"] < sum(cpus(j) for j in jobs)


def test_local_setup_matches_the_local_cluster_pools() -> None:
    docs = {
        (d["kind"], d["metadata"]["name"]): d
        for d in load_documents(MANIFESTS / "samples" / "local-setup.yaml")
    }
    assert docs[("ResourceFlavor", "cpu")]["spec"]["nodeLabels"] == {"kadmit.dev/pool": "cpu"}
    gpu = docs[("ResourceFlavor", "gpu")]["spec"]
    assert gpu["nodeLabels"] == {"kadmit.dev/pool": "gpu"}
    assert gpu["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    cq = docs[("ClusterQueue", "cluster-queue")]["spec"]
    (group,) = cq["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    assert [f["name"] for f in group["flavors"]] == ["cpu", "gpu"]
    lq = docs[("LocalQueue", "default")]
    assert (lq["metadata"]["namespace"], lq["spec"]["clusterQueue"]) == ("default", "cluster-queue")


def _cluster_queue(validators: Validators) -> tuple[ObjectValidator, dict[str, Any]]:
    docs = load_documents(MANIFESTS / "samples" / "admin__single-clusterqueue-setup.yaml")
    (cq,) = [d for d in docs if d["kind"] == "ClusterQueue"]
    return validator_for(validators, cq), copy.deepcopy(cq)


def test_wrong_enum_fails_with_its_field_path(validators: Validators) -> None:
    validator, cq = _cluster_queue(validators)
    cq["spec"]["queueingStrategy"] = "LIFO"
    (error,) = validator.errors(cq)
    assert error.startswith("spec.queueingStrategy: 'LIFO' is not one of")


def test_unknown_field_fails_with_its_field_path(validators: Validators) -> None:
    validator, cq = _cluster_queue(validators)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuta"] = "1Gi"
    (error,) = validator.errors(cq)
    assert error.startswith("spec.resourceGroups[0].flavors[0].resources[1]: Additional properties")
    assert "nominalQuta" in error


def test_bad_quantity_fails(validators: Validators) -> None:
    validator, cq = _cluster_queue(validators)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] = "36 gigs"
    (error,) = validator.errors(cq)
    assert error.startswith(
        "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: '36 gigs' does not match"
    )


def test_duplicate_map_key_fails(validators: Validators) -> None:
    validator, cq = _cluster_queue(validators)
    flavors = cq["spec"]["resourceGroups"][0]["flavors"]
    flavors.append(copy.deepcopy(flavors[0]))
    (error,) = validator.errors(cq)
    assert error == "spec.resourceGroups[0].flavors: duplicate entry for key {'name': 'default-flavor'}"


def test_cel_rules_hold_and_fail_with_their_path(validators: Validators) -> None:
    validator, cq = _cluster_queue(validators)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 1
    assert validator.errors(cq) == ["spec: borrowingLimit must be nil when cohort is empty"]
    cq["spec"]["cohortName"] = "research"
    assert validator.errors(cq) == []
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    assert validator.errors(cq) == [
        "spec.resourceGroups[0]: flavors must have the same number of resources as the coveredResources"
    ]


def test_cel_rules_see_defaults(validators: Validators) -> None:
    validator, cq = _cluster_queue(validators)
    cq["spec"]["flavorFungibility"] = {"preference": "BorrowingOverPreemption"}
    # whenCanBorrow defaults to MayStopSearch, so the preference is refused.
    assert validator.errors(cq) == [
        "spec.flavorFungibility: preference can only be set when both whenCanBorrow and whenCanPreempt "
        "are TryNextFlavor"
    ]
    cq["spec"]["flavorFungibility"] |= {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    assert validator.errors(cq) == []


def test_transition_rule_refuses_changing_the_cluster_queue_of_a_local_queue(validators: Validators) -> None:
    docs = load_documents(MANIFESTS / "samples" / "admin__single-clusterqueue-setup.yaml")
    (lq,) = [d for d in docs if d["kind"] == "LocalQueue"]
    validator = validator_for(validators, lq)
    moved = copy.deepcopy(lq)
    moved["spec"]["clusterQueue"] = "other-queue"
    assert validator.errors(moved, old=lq) == ["spec.clusterQueue: field is immutable"]
    assert validator.errors(lq, old=lq) == []


def test_v1beta1_manifest_validates_only_against_v1beta1(validators: Validators) -> None:
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "legacy"},
        "spec": {
            "cohort": "research",
            "admissionChecks": ["sample-prov"],
            "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 9}]}
                    ],
                }
            ],
        },
    }
    assert validator_for(validators, cq).errors(cq) == []
    as_v1beta2 = validators[("kueue.x-k8s.io/v1beta2", "ClusterQueue")].errors(cq)
    assert any(e.startswith("spec: Additional properties") and "'cohort'" in e for e in as_v1beta2)
    assert any(
        e.startswith("spec.flavorFungibility.whenCanBorrow: 'Borrow' is not one of") for e in as_v1beta2
    )


def test_workload_with_priority_class_ref_needs_a_priority(validators: Validators) -> None:
    wl: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-sample-ef3a1", "namespace": "default"},
        "spec": {
            "queueName": "user-queue",
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
            "podSets": [
                {"count": 3, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
            ],
        },
    }
    validator = validator_for(validators, wl)
    assert validator.errors(wl) == ["spec: priority should not be nil when priorityClassRef is set"]
    wl["spec"]["priority"] = 10000
    assert validator.errors(wl) == []
    wl["spec"]["priorityClassRef"]["kind"] = "PriorityClass"
    assert validator.errors(wl) == [
        "spec.priorityClassRef: only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group"
    ]


@pytest.mark.parametrize("path", WITH_JOBS, ids=lambda p: p.name)
def test_workloads_made_from_sample_jobs_fit_the_workload_crd(validators: Validators, path: Path) -> None:
    """The Workload kadmit creates for each sample Job is one the Workload CRD accepts."""
    batch_job = pytest.importorskip("kadmit.controller.jobs.batch_job")
    jobs = [d for d in load_documents(path) if d["kind"] == "Job"]
    classes = {
        d["metadata"]["name"]: d["value"]
        for sample in SAMPLES
        for d in load_documents(sample)
        if d["kind"] == "WorkloadPriorityClass"
    }
    for job in jobs:
        job = copy.deepcopy(job)
        job["metadata"].setdefault("name", job["metadata"].get("generateName", "job-") + "x1y2z")
        job["metadata"]["uid"] = "0b4c5f6e-1111-2222-3333-444455556666"
        workload = batch_job.workload_for_job(job, classes)
        assert validator_for(validators, workload).errors(workload) == [], job["metadata"]["name"]


def test_a_jobset_keeps_fields_the_reduced_schema_does_not_describe(validators: Validators) -> None:
    jobset: dict[str, Any] = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "sleep",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "network": {"enableDNSHostnames": True},
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                        }
                    },
                }
            ],
            "successPolicy": {"operator": "All"},
        },
    }
    validator = validator_for(validators, jobset)
    assert validator.errors(jobset) == []
    jobset["spec"]["successPolicy"]["operator"] = "Most"
    (error,) = validator.errors(jobset)
    assert error.startswith("spec.successPolicy.operator: 'Most' is not one of")


def test_v1beta1_workload_uses_priority_class_source(validators: Validators) -> None:
    wl: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "legacy", "namespace": "default"},
        "spec": {
            "queueName": "user-queue",
            "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
            "priorityClassName": "high-priority",
            "priority": 10000,
            "podSets": [
                {"count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
            ],
        },
    }
    assert validator_for(validators, wl).errors(wl) == []
    as_v1beta2 = validators[("kueue.x-k8s.io/v1beta2", "Workload")].errors(wl)
    assert len(as_v1beta2) == 1 and as_v1beta2[0].startswith("spec: Additional properties")


def test_converted_objects_fit_the_schema_of_their_new_version(validators: Validators) -> None:
    """kadmit's /convert turns every Kueue sample into a valid v1beta1 object and back."""
    conversion = pytest.importorskip("kadmit.webhook.conversion")
    converted = 0
    for path in SAMPLES:
        for doc in load_documents(path):
            if not doc["apiVersion"].startswith("kueue.x-k8s.io/"):
                continue
            down = conversion.convert(doc, "kueue.x-k8s.io/v1beta1")
            assert validator_for(validators, down).errors(down) == [], (path.name, doc["metadata"]["name"])
            up = conversion.convert(down, "kueue.x-k8s.io/v1beta2")
            assert validator_for(validators, up).errors(up) == [], (path.name, doc["metadata"]["name"])
            converted += 1
    assert converted >= 20


def test_a_v1beta1_topology_assignment_converts_to_a_valid_v1beta2_one(validators: Validators) -> None:
    conversion = pytest.importorskip("kadmit.webhook.conversion")
    workload: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "tas", "namespace": "default"},
        "spec": {"podSets": [{"name": "main", "count": 6, "template": {"spec": {"containers": []}}}]},
        "status": {
            "admission": {
                "clusterQueue": "cluster-queue",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": 6,
                        "topologyAssignment": {
                            "levels": ["cloud.provider.com/block", "cloud.provider.com/rack"],
                            "domains": [
                                {"values": ["block-1", "rack-1"], "count": 4},
                                {"values": ["block-1", "rack-2"], "count": 2},
                            ],
                        },
                    }
                ],
            }
        },
    }
    assert validator_for(validators, workload).errors(workload) == []
    up = conversion.convert(workload, "kueue.x-k8s.io/v1beta2")
    assert validator_for(validators, up).errors(up) == []
    (assignment,) = up["status"]["admission"]["podSetAssignments"]
    assert assignment["topologyAssignment"]["slices"][0]["domainCount"] == 2


def test_a_workloads_lifecycle_as_kadmit_writes_it_fits_the_crd(validators: Validators) -> None:
    """Create, reserve, admit, evict, release and finish a Workload with kadmit's own status writers;
    every step is a valid update of the one before (schemas and CEL transition rules)."""
    batch_job = pytest.importorskip("kadmit.controller.jobs.batch_job")
    status_writers = pytest.importorskip("kadmit.controller.workload_status")
    (job,) = [
        d for d in load_documents(MANIFESTS / "samples" / "single-clusterqueue.yaml") if d["kind"] == "Job"
    ][:1]
    job["metadata"]["uid"] = "0b4c5f6e-1111-2222-3333-444455556666"
    workload = batch_job.workload_for_job(job)
    validator = validator_for(validators, workload)
    assert validator.errors(workload) == []
    now = 1767225600.0

    def step(name: str, change: Any) -> None:
        nonlocal now
        now += 30
        old = copy.deepcopy(workload)
        change(workload.setdefault("status", {}), now)
        assert validator.errors(workload, old=old) == [], name

    admission = {
        "clusterQueue": "cluster-queue",
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
             "resourceUsage": {"cpu": "6", "memory": "600Mi"}, "count": 3}
        ],
    }  # fmt: skip
    reserved = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
         "message": "Quota reserved in ClusterQueue cluster-queue"},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"},
    ]  # fmt: skip
    writers = status_writers
    step("reserve", lambda status, now: writers.reserve(status, admission, reserved, ["sample-prov"], now))
    # The CEL transition rules refuse what Kueue refuses: another queue while quota is reserved.
    moved = copy.deepcopy(workload)
    moved["spec"]["queueName"] = "other-queue"
    assert validator.errors(moved, old=workload) == [
        "<root>: queueName is immutable while workload quota reserved"
    ]
    step("pods ready", lambda status, now: writers.set_pods_ready(status, True, now))
    step(
        "evict", lambda status, now: writers.evict(status, "Preempted", "Preempted in the ClusterQueue", now)
    )
    step(
        "release", lambda status, now: writers.clear_reservation(status, now, True, "Preempted", "Preempted")
    )
    step("finish", lambda status, now: writers.finish(status, "Succeeded", "Job finished successfully", now))
    assert "admission" not in workload["status"]
    assert workload["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1}
    ]
