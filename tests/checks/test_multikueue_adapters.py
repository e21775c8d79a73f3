"""The MultiKueue adapters' rules, pure: what a worker receives for each kind, what comes back."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.checks.multikueue import MultiKueueCheck, MultiKueueSettings, settings_from_config
from kadmit.checks.multikueue_adapters import (
    MultiKueueAdapter,
    PodAdapter,
    builtin_adapters,
    discovered_resource,
    gvk_of_reference,
    parse_external_name,
)
from kadmit.checks.multikueue_remote import ORIGIN_LABEL, PREBUILT_WORKLOAD, local_workload_of
from kadmit.kube import Resource
from kadmit.kube.resources import JOBS, JOBSETS, MULTIKUEUE_CLUSTERS, PODS, SECRETS

Obj = dict[str, Any]
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def local_jobset() -> Obj:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "7",
            "generation": 1,
            "creationTimestamp": "2026-11-25T00:00:00Z",
            "ownerReferences": [{"kind": "X", "name": "x", "uid": "u0"}],
            "finalizers": ["f"],
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
            "annotations": {"note": "n"},
        },
        "spec": {"suspend": True, "managedBy": MULTIKUEUE, "replicatedJobs": [{"name": "a"}]},
        "status": {"replicatedJobsStatus": [{"name": "a", "active": 1}]},
    }


def test_the_generic_copy_is_clean_metadata_the_spec_and_no_managed_by() -> None:
    adapter = builtin_adapters()[gvk_of_reference("jobset.x-k8s.io/v1alpha2", "JobSet")]
    local = local_jobset()
    remote = adapter.remote_object(local, "jobset-train-abc", "mgr")
    assert remote == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "labels": {
                "kueue.x-k8s.io/queue-name": "q",
                ORIGIN_LABEL: "mgr",
                PREBUILT_WORKLOAD: "jobset-train-abc",
            },
            "annotations": {"note": "n", PREBUILT_WORKLOAD: "jobset-train-abc"},
        },
        "spec": {"suspend": True, "replicatedJobs": [{"name": "a"}]},
    }
    assert local["spec"]["managedBy"] == MULTIKUEUE  # the local object is untouched
    assert local_workload_of(remote) == "jobset-train-abc"
    assert adapter.status_to_copy(local, {"status": {"terminalState": "Completed"}}) == {
        "terminalState": "Completed"
    }


def test_only_objects_managed_by_multikueue_are_dispatched() -> None:
    adapter = MultiKueueAdapter(JOBSETS)
    assert adapter.managed_problem(local_jobset()) is None
    other = local_jobset()
    other["spec"]["managedBy"] = "jobset.sigs.k8s.io/jobset-controller"
    assert adapter.managed_problem(other) == (
        'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" '
        'not "jobset.sigs.k8s.io/jobset-controller"'
    )
    assert not adapter.is_dispatched(other)


def test_a_kind_keeping_managed_by_elsewhere_says_where() -> None:
    kubeflow = MultiKueueAdapter(
        Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"), managed_by=("runPolicy", "managedBy")
    )
    local = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"runPolicy": {"managedBy": MULTIKUEUE, "suspend": True}, "pytorchReplicaSpecs": {}},
    }
    assert kubeflow.managed_problem(local) is None
    assert kubeflow.remote_object(local, "w", "mgr")["spec"] == {
        "runPolicy": {"suspend": True},
        "pytorchReplicaSpecs": {},
    }
    assert kubeflow.managed_problem({"spec": {}}) == (
        'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not ""'
    )


def test_adapters_are_keyed_by_gvk_as_kueue_keys_them() -> None:
    adapters = builtin_adapters(["batch/job", "jobset.x-k8s.io/jobset"])
    assert sorted(adapters) == ["batch/v1, Kind=Job", "jobset.x-k8s.io/v1alpha2, Kind=JobSet"]
    assert gvk_of_reference("v1", "Pod") == "/v1, Kind=Pod"
    assert builtin_adapters(["pod"])["/v1, Kind=Pod"].resource == PODS


@pytest.mark.parametrize(
    "framework, api_version, kind, own",
    [
        ("ray.io/rayjob", "ray.io/v1", "RayJob", "ray.io/kuberay-operator"),
        ("ray.io/raycluster", "ray.io/v1", "RayCluster", "ray.io/kuberay-operator"),
        (
            "workload.codeflare.dev/appwrapper",
            "workload.codeflare.dev/v1beta2",
            "AppWrapper",
            "workload.codeflare.dev/appwrapper-controller",
        ),
    ],
)
def test_ray_and_appwrapper_are_dispatched_as_kueues_adapters_do(
    framework: str, api_version: str, kind: str, own: str
) -> None:
    """Kueue's ray.NewMKAdapter and appwrapper adapter: spec.managedBy decides, the copy is the
    spec without it, the whole status comes back."""
    adapters = builtin_adapters([framework])
    assert list(adapters) == [gvk_of_reference(api_version, kind)]
    adapter = adapters[gvk_of_reference(api_version, kind)]
    assert adapter.framework == framework
    local = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "r", "namespace": "ns", "uid": "u", "resourceVersion": "3"},
        "spec": {"suspend": True, "managedBy": MULTIKUEUE, "entrypoint": "python x.py"},
        "status": {"jobDeploymentStatus": "Suspended"},
    }
    assert adapter.managed_problem(local) is None and adapter.is_dispatched(local)
    remote = adapter.remote_object(local, "wl-r", "mgr")
    assert remote["spec"] == {"suspend": True, "entrypoint": "python x.py"}
    assert remote["metadata"]["annotations"] == {PREBUILT_WORKLOAD: "wl-r"}
    assert remote["metadata"]["labels"] == {ORIGIN_LABEL: "mgr", PREBUILT_WORKLOAD: "wl-r"}
    running = {"status": {"jobDeploymentStatus": "Running", "rayClusterName": "r-abc"}}
    assert adapter.status_to_copy(local, running) == running["status"]
    mine = {**local, "spec": {**local["spec"], "managedBy": own}}
    assert adapter.managed_problem(mine) == (
        f'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not "{own}"'
    )
    assert not adapter.is_dispatched(mine)


def test_a_trainjob_copy_leaves_out_kueues_runtime_patch() -> None:
    """Kueue's trainjob adapter: the manager's admission (in Kueue's runtime patch) is not the
    worker's; the worker's Kueue adds and fills its own. Other patches travel."""
    adapter = builtin_adapters(["trainer.kubeflow.org/trainjob"])[
        gvk_of_reference("trainer.kubeflow.org/v1alpha1", "TrainJob")
    ]
    kueue_patch = {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {"spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}},
                        }
                    ]
                }
            }
        },
    }
    user_patch = {"manager": "example.com/tuner", "trainer": {"numNodes": 2}}
    local = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {
            "suspend": False,
            "managedBy": MULTIKUEUE,
            "runtimeRef": {"name": "torch"},
            "runtimePatches": [kueue_patch, user_patch],
        },
    }
    remote = adapter.remote_object(local, "wl-t", "mgr")
    assert remote["spec"] == {
        "suspend": False,
        "runtimeRef": {"name": "torch"},
        "runtimePatches": [user_patch],
    }
    assert local["spec"]["runtimePatches"] == [kueue_patch, user_patch]  # the local object is untouched
    bare = adapter.remote_object(
        {**local, "spec": {"managedBy": MULTIKUEUE, "runtimeRef": {"name": "x"}}}, "w", "m"
    )
    assert bare["spec"] == {"runtimeRef": {"name": "x"}}


def test_the_check_watches_the_kinds_of_its_adapters() -> None:
    check = MultiKueueCheck(MultiKueueSettings(frameworks=("batch/job", "jobset.x-k8s.io/jobset", "pod")))
    # Pods are not watched on the manager: a pod group's Workload drives them.
    assert check.watches == (MULTIKUEUE_CLUSTERS, SECRETS, JOBS, JOBSETS)
    assert MultiKueueCheck().watches == (MULTIKUEUE_CLUSTERS, SECRETS, JOBS)


def test_a_pod_keeps_its_gated_scheduling_condition_until_the_remote_pod_is_scheduled() -> None:
    adapter = PodAdapter(PODS, "pod")
    gated = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    local = {
        "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]},
        "status": {"conditions": [gated]},
    }
    pending = {
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    }
    assert adapter.status_to_copy(local, pending) == {"phase": "Pending", "conditions": [gated]}
    running = {"status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}}
    assert adapter.status_to_copy(local, running) == running["status"]
    assert adapter.managed_problem({"spec": {}}) is None  # Kueue dispatches Pods without asking
    member = {"metadata": {"labels": {"kueue.x-k8s.io/pod-group-name": "g"}}}
    assert adapter.group_selector(member) == "kueue.x-k8s.io/pod-group-name=g"
    remote = adapter.remote_object(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "1"},
            "spec": {"containers": []},
            "status": {"phase": "Pending"},
        },
        "pod-group-g",
        "mgr",
    )
    assert "status" not in remote and "uid" not in remote["metadata"]
    assert remote["metadata"]["labels"][ORIGIN_LABEL] == "mgr"


def test_an_external_framework_is_named_kind_version_group_and_found_by_discovery() -> None:
    assert parse_external_name("MyJob.v1.example.com") == ("example.com", "v1", "MyJob")
    for bad in ("MyJob", "MyJob.v1", "", "My_Job.v1.example.com", None):
        with pytest.raises(ValueError):
            parse_external_name(bad)
    listing = {
        "resources": [
            {"name": "myjobs/status", "kind": "MyJob", "namespaced": True},
            {"name": "myjobs", "kind": "MyJob", "namespaced": True},
        ]
    }
    found = discovered_resource(listing, "example.com", "v1", "MyJob")
    assert found == Resource("example.com", "v1", "myjobs", "MyJob")
    assert discovered_resource(listing, "example.com", "v1", "Other") is None


def test_settings_read_the_enabled_frameworks_and_the_external_ones() -> None:
    settings = settings_from_config(
        {
            "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
            "multiKueue": {"externalFrameworks": [{"name": "MyJob.v1.example.com"}]},
        }
    )
    assert settings.frameworks == ("batch/job", "jobset.x-k8s.io/jobset")
    assert settings.external_frameworks == ("MyJob.v1.example.com",)
    with pytest.raises(ValueError, match="conflicts with a built-in MultiKueue adapter"):
        settings_from_config({"multiKueue": {"externalFrameworks": [{"name": "Job.v1.batch"}]}})


def test_the_deferred_sync_note_is_kueues_and_written_only_while_no_suspended_condition_is_true() -> None:
    """Kueue's Job adapter sets ``Suspended=True`` (``MultiKueueAdapter``, "Set by MultiKueue
    adapter") on the suspended local Job while its copy runs, unless one is True already, whoever set it."""
    adapter = builtin_adapters(("batch/job",))["batch/v1, Kind=Job"]
    complete = {"type": "Complete", "status": "False", "reason": "R", "message": "m"}

    def job(*conditions: Obj) -> Obj:
        return {"metadata": {"name": "j", "namespace": "ns"}, "spec": {"suspend": True},
                "status": {"conditions": list(conditions)}}

    note = adapter.deferred_status(job(complete), 0.0)
    assert note is not None
    assert note["conditions"][0] == complete
    assert {k: v for k, v in note["conditions"][1].items() if "Time" not in k} == {
        "type": "Suspended", "status": "True", "reason": "MultiKueueAdapter",
        "message": "Set by MultiKueue adapter",
    }
    assert adapter.deferred_status(job(note["conditions"][1]), 5.0) is None  # written once
    suspended = {"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended"}
    assert adapter.deferred_status(job(suspended), 5.0) is None  # True already: left as it is
    resumed = {"type": "Suspended", "status": "False", "reason": "JobResumed", "message": "Job resumed"}
    replaced = adapter.deferred_status(job(resumed, complete), 5.0)
    assert replaced is not None  # replaced where it stands, as Kueue's setJobStatusCondition does
    assert [c["type"] for c in replaced["conditions"]] == ["Suspended", "Complete"]
    assert replaced["conditions"][0]["reason"] == "MultiKueueAdapter"
