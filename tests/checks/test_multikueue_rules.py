"""The MultiKueue check's rules, without a cluster: kubeconfigs, copies, parameters, settings."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from kadmit.checks.multikueue import (
    ALL_AT_ONCE,
    INCREMENTAL,
    MultiKueueSettings,
    parse_config,
    parse_duration,
    settings_from_config,
)
from kadmit.checks.multikueue_adapters import JobAdapter
from kadmit.checks.multikueue_clusters import (
    BAD_KUBECONFIG,
    INSECURE_KUBECONFIG,
    KubeConfigError,
    kubeconfig_text,
    parse_kubeconfig,
    reconnect_delay,
)
from kadmit.checks.multikueue_remote import (
    ORIGIN_LABEL,
    PREBUILT_WORKLOAD,
    admitted_at,
    local_workload_of,
    remote_job,
    remote_workload,
    same_spec,
)
from kadmit.checks.plugin import ParametersError
from kadmit.kube.resources import JOBS

Obj = dict[str, Any]


def kubeconfig(cluster: Obj | None = None, user: Obj | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "w", "cluster": cluster if cluster is not None else {"server": "https://10.0.0.1:6443"}}
        ],
        "users": [{"name": "w", "user": user if user is not None else {"token": "t"}}],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
        "current-context": "w",
    }


def refused(config: Obj) -> KubeConfigError:
    import yaml

    with pytest.raises(KubeConfigError) as caught:
        parse_kubeconfig(yaml.safe_dump(config))
    return caught.value


def test_a_clean_kubeconfig_passes() -> None:
    import yaml

    assert parse_kubeconfig(yaml.safe_dump(kubeconfig()))["current-context"] == "w"
    assert parse_kubeconfig(yaml.safe_dump(kubeconfig({"server": "https://worker-1.example.com"})))


@pytest.mark.parametrize(
    ("cluster", "user", "reason", "words"),
    [
        ({"server": "https://a", "insecure-skip-tls-verify": True}, None, INSECURE_KUBECONFIG, "skip-tls"),
        ({"server": "https://a", "certificate-authority": "/ca"}, None, INSECURE_KUBECONFIG, "file paths"),
        ({}, None, BAD_KUBECONFIG, "no server"),
        ({"server": "https://Not_A_Host:1"}, None, BAD_KUBECONFIG, "neither an IP"),
        (None, {"tokenFile": "/t"}, INSECURE_KUBECONFIG, "tokenFile"),
        (None, {"exec": {"command": "aws"}}, INSECURE_KUBECONFIG, "exec plugins"),
        (None, {"username": "u", "password": "p"}, INSECURE_KUBECONFIG, "basic authentication"),
        (None, {"auth-provider": {"name": "gcp"}}, INSECURE_KUBECONFIG, "auth providers"),
    ],
)
def test_kueues_kubeconfig_rules(cluster: Obj | None, user: Obj | None, reason: str, words: str) -> None:
    error = refused(kubeconfig(cluster, user))
    assert error.reason == reason
    assert words in error.message


def test_not_yaml_or_not_a_mapping() -> None:
    with pytest.raises(KubeConfigError, match="not valid YAML"):
        parse_kubeconfig("a: [")
    with pytest.raises(KubeConfigError, match="not a YAML mapping"):
        parse_kubeconfig("- 1")


def cluster_obj(location: str, location_type: str | None = None) -> Obj:
    source: Obj = {"location": location}
    if location_type:
        source["locationType"] = location_type
    return {"metadata": {"name": "c"}, "spec": {"clusterSource": {"kubeConfig": source}}}


async def test_secret_sources() -> None:
    secrets = {
        "good": {"data": {"kubeconfig": base64.b64encode(b"text").decode()}},
        "nokey": {"data": {"other": ""}},
        "garbled": {"data": {"kubeconfig": "%%%"}},
    }
    assert await kubeconfig_text(cluster_obj("good"), secrets.get, None) == "text"
    with pytest.raises(KubeConfigError, match='secrets "missing" not found'):
        await kubeconfig_text(cluster_obj("missing"), secrets.get, None)
    with pytest.raises(KubeConfigError, match='key "kubeconfig" not found in secret "nokey"'):
        await kubeconfig_text(cluster_obj("nokey"), secrets.get, None)
    with pytest.raises(KubeConfigError, match="not base64"):
        await kubeconfig_text(cluster_obj("garbled"), secrets.get, None)
    with pytest.raises(KubeConfigError, match="MultiKueueClusterProfile") as caught:
        await kubeconfig_text(
            {"spec": {"clusterSource": {"clusterProfileRef": {"name": "p"}}}}, secrets.get, None
        )
    assert caught.value.reason == "MultiKueueClusterProfileFeatureDisabled"


async def test_path_sources_stay_under_the_root(tmp_path: Path) -> None:
    root = tmp_path / "kubeconfigs"
    root.mkdir()
    (root / "w1").write_text("inside")
    (tmp_path / "outside").write_text("outside")
    (root / "link").symlink_to(tmp_path / "outside")
    assert await kubeconfig_text(cluster_obj(str(root / "w1"), "Path"), dict().get, str(root)) == "inside"
    with pytest.raises(KubeConfigError, match="is not under"):
        await kubeconfig_text(cluster_obj(str(root / "link"), "Path"), dict().get, str(root))
    with pytest.raises(KubeConfigError, match=r"without '\.\.'"):
        await kubeconfig_text(cluster_obj(f"{root}/../outside", "Path"), dict().get, str(root))
    with pytest.raises(KubeConfigError, match="must be absolute"):
        await kubeconfig_text(cluster_obj("w1", "Path"), dict().get, str(root))
    with pytest.raises(KubeConfigError, match="cannot read kubeconfig"):
        await kubeconfig_text(cluster_obj(str(root / "none"), "Path"), dict().get, str(root))
    assert (
        await kubeconfig_text(cluster_obj(str(tmp_path / "outside"), "Path"), dict().get, None) == "outside"
    )


def test_reconnect_backoff_is_kueues() -> None:
    assert [reconnect_delay(n, 5.0) for n in (1, 2, 3, 7, 8, 50)] == [5, 10, 20, 320, 320, 320]


def local_workload() -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-a",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "7",
            "labels": {"kueue.x-k8s.io/job-uid": "j1", "team": "x"},
            "annotations": {"note": "n"},
            "ownerReferences": [{"kind": "Job", "name": "a", "uid": "j1"}],
        },
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]},
    }


def test_the_remote_workload_is_a_clean_clone() -> None:
    remote = remote_workload(local_workload(), "mgr")
    assert remote["metadata"] == {
        "name": "job-a",
        "namespace": "ns",
        "labels": {"team": "x", ORIGIN_LABEL: "mgr"},
        "annotations": {"note": "n"},
    }
    assert "status" not in remote
    assert same_spec(local_workload(), remote)
    changed = remote_workload(local_workload(), "mgr")
    changed["spec"]["podSets"][0]["count"] = 2
    assert not same_spec(local_workload(), changed)
    gated = remote_workload(local_workload(), "mgr")
    gated["spec"]["preemptionGates"] = [{"name": "g"}]
    assert same_spec(local_workload(), gated)


def test_the_remote_job_is_run_by_the_workers_job_controller() -> None:
    job = {
        "metadata": {"name": "a", "namespace": "ns", "uid": "j1", "labels": {"queue": "q"}},
        "spec": {
            "managedBy": "kueue.x-k8s.io/multikueue",
            "suspend": True,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "j1"}},
            "template": {
                "metadata": {"labels": {"controller-uid": "j1", "job-name": "a", "app": "x"}},
                "spec": {},
            },
        },
        "status": {"active": 1},
    }
    remote = remote_job(job, "job-a", "mgr")
    assert "managedBy" not in remote["spec"] and "selector" not in remote["spec"]
    assert remote["spec"]["template"]["metadata"]["labels"] == {"app": "x"}
    assert remote["metadata"]["labels"][ORIGIN_LABEL] == "mgr"
    assert remote["metadata"]["annotations"][PREBUILT_WORKLOAD] == "job-a"
    assert "status" not in remote and "uid" not in remote["metadata"]
    assert local_workload_of(remote) == "job-a"
    assert job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"  # the local Job is untouched
    long_name = "w" * 64
    assert PREBUILT_WORKLOAD not in remote_job(job, long_name, "mgr")["metadata"]["labels"]


def test_managed_by() -> None:
    adapter = JobAdapter(JOBS, "batch/job")
    assert adapter.managed_problem({"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}) is None
    assert adapter.managed_problem({"spec": {"managedBy": "other"}}) == (
        'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not "other"'
    )


def test_job_status_is_copied_only_when_kueue_copies_it() -> None:
    adapter = JobAdapter(JOBS, "batch/job")
    running = {"spec": {"suspend": False}, "status": {"active": 1}}
    suspended = {"spec": {"suspend": True}}
    done = {"spec": {"suspend": False}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert adapter.status_to_copy(running, running) == {"active": 1}
    assert adapter.status_to_copy(suspended, suspended) == {}
    assert adapter.status_to_copy(suspended, running) is None
    assert adapter.status_to_copy(suspended, done) == done["status"]


def test_the_earliest_admission_wins() -> None:
    def admitted(at: str) -> Obj:
        return {"status": {"conditions": [{"type": "Admitted", "status": "True", "lastTransitionTime": at}]}}

    early, late = admitted("2026-01-01T00:00:01Z"), admitted("2026-01-01T00:00:02Z")
    times = [admitted_at(late), admitted_at(early)]
    assert None not in times
    assert min(t for t in times if t is not None) == admitted_at(early)
    assert admitted_at({"status": {"conditions": [{"type": "Admitted", "status": "False"}]}}) is None
    undated = admitted_at({"status": {"conditions": [{"type": "Admitted", "status": "True"}]}})
    dated = [t for t in times if t is not None]
    assert undated is not None and min([*dated, undated]) == admitted_at(early)  # comparable, and last


def test_config_parameters() -> None:
    assert parse_config({"metadata": {"name": "c"}, "spec": {"clusters": ["a", "b"]}}).clusters == ("a", "b")
    for spec, words in (
        ({}, "at least one"),
        ({"clusters": ["a", "a"]}, "unique"),
        ({"clusters": [""]}, "non-empty"),
        ({"clusters": [f"c{i}" for i in range(21)]}, "at most 20"),
    ):
        with pytest.raises(ParametersError, match=words):
            parse_config({"metadata": {"name": "c"}, "spec": spec})


def test_settings_from_kueues_configuration() -> None:
    assert settings_from_config({}) == MultiKueueSettings()
    settings = settings_from_config(
        {
            "namespace": "kueue-system",
            "multiKueue": {
                "gcInterval": "1m30s",
                "workerLostTimeout": "0",
                "origin": "east",
                "dispatcherName": INCREMENTAL,
                "incrementalDispatcherConfig": {"stepSize": 2},
            },
        }
    )
    assert (settings.namespace, settings.gc_interval, settings.worker_lost_timeout) == ("kueue-system", 90, 0)
    assert (settings.origin, settings.dispatcher, settings.incremental_step) == ("east", INCREMENTAL, 2)
    assert MultiKueueSettings().dispatcher == ALL_AT_ONCE
    for document, words in (
        ({"multiKueue": {"gcInterval": "soon"}}, "multiKueue.gcInterval: invalid duration"),
        ({"multiKueue": {"origin": "not a label"}}, "multiKueue.origin"),
        ({"multiKueue": {"incrementalDispatcherConfig": {"stepSize": 0}}}, "stepSize"),
        ({"namespace": ""}, "namespace"),
    ):
        with pytest.raises(ValueError, match=words):
            settings_from_config(document)
    assert parse_duration("1h2m3.5s") == 3723.5
    assert parse_duration("250ms") == 0.25
