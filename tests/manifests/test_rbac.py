"""kadmit's service account may do what kadmit needs, and no more where it matters."""

from __future__ import annotations

from typing import Any

import pytest

from tests.manifests.conftest import MANIFESTS, load_documents

SUBJECT = {"kind": "ServiceAccount", "name": "kadmit-controller-manager", "namespace": "kadmit-system"}
KUEUE = [
    "admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters", "multikueueconfigs",
    "provisioningrequestconfigs", "resourceflavors", "workloadpriorityclasses", "workloads",
]  # fmt: skip
CONVERTING = ["clusterqueues", "cohorts", "localqueues", "multikueueclusters", "workloads"]

Request = tuple[str, str, str, str | None]  # group, resource, verb, object name


@pytest.fixture(scope="module")
def rbac() -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in load_documents(MANIFESTS / "base" / "rbac.yaml")}


def allows(rules: list[dict[str, Any]], request: Request) -> bool:
    group, resource, verb, name = request
    return any(
        group in rule["apiGroups"]
        and resource in rule["resources"]
        and verb in rule["verbs"]
        and ("resourceNames" not in rule or name in rule["resourceNames"])
        for rule in rules
    )


def cluster_rules(rbac: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    binding = rbac[("ClusterRoleBinding", "kadmit-manager-rolebinding")]
    assert SUBJECT in binding["subjects"]
    rules: list[dict[str, Any]] = rbac[("ClusterRole", binding["roleRef"]["name"])]["rules"]
    return rules


def namespace_rules(rbac: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    binding = rbac[("RoleBinding", "kadmit-manager-rolebinding")]
    assert binding["metadata"]["namespace"] == "kadmit-system" and SUBJECT in binding["subjects"]
    role = rbac[("Role", binding["roleRef"]["name"])]
    assert role["metadata"]["namespace"] == "kadmit-system"
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def test_cluster_wide_permissions(rbac: dict[tuple[str, str], dict[str, Any]]) -> None:
    needed: list[Request] = [
        *[("batch", "jobs", verb, None) for verb in ("get", "list", "watch", "update", "patch")],
        ("batch", "jobs/status", "patch", None),
        *[("jobset.x-k8s.io", "jobsets", verb, None) for verb in ("get", "list", "watch", "update", "patch")],
        *[("", "pods", verb, None) for verb in ("get", "list", "watch")],
        ("", "events", "create", None),
        ("events.k8s.io", "events", "create", None),
        *[("kueue.x-k8s.io", r, v, None) for r in KUEUE for v in ("get", "list", "watch")],
        *[("kueue.x-k8s.io", "workloads", v, None) for v in ("create", "update", "patch", "delete")],
        *[
            ("kueue.x-k8s.io", f"{r}/status", "patch", None)
            for r in ("workloads", "clusterqueues", "localqueues")
        ],
        ("", "resourcequotas", "list", None),
        ("", "namespaces", "watch", None),
        ("", "podtemplates", "create", None),
        ("", "podtemplates", "delete", None),
        ("autoscaling.x-k8s.io", "provisioningrequests", "create", None),
        ("autoscaling.x-k8s.io", "provisioningrequests", "delete", None),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "list", None),
        (
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "patch",
            "kadmit-mutating-webhook-configuration",
        ),
        (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            "update",
            "kadmit-validating-webhook-configuration",
        ),
        *[
            ("apiextensions.k8s.io", "customresourcedefinitions", "patch", f"{r}.kueue.x-k8s.io")
            for r in CONVERTING
        ],
        ("apiextensions.k8s.io", "customresourcedefinitions", "get", "anything.example.com"),
    ]
    rules = cluster_rules(rbac)
    assert [r for r in needed if not allows(rules, r)] == []


def test_cluster_wide_refusals(rbac: dict[tuple[str, str], dict[str, Any]]) -> None:
    refused: list[Request] = [
        ("", "secrets", "get", "any-secret"),  # only in kadmit-system, through the Role
        ("", "pods", "create", None),
        ("coordination.k8s.io", "leases", "update", "kadmit-controller-manager"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations", "patch", "someone-elses-webhook"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "update", "jobsets.jobset.x-k8s.io"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "delete", "workloads.kueue.x-k8s.io"),
        ("rbac.authorization.k8s.io", "clusterroles", "update", "kadmit-manager-role"),
        # queues are the batch admin's: kadmit only writes their status
        *[("kueue.x-k8s.io", r, v, None) for r in ("clusterqueues", "resourceflavors")
          for v in ("create", "patch", "delete")],  # update: only to lift the in-use finalizer
        *[("kueue.x-k8s.io", "localqueues", v, None) for v in ("create", "update", "patch", "delete")],
    ]
    rules = cluster_rules(rbac)
    assert [r for r in refused if allows(rules, r)] == []
    assert all("*" not in rule["verbs"] and "*" not in rule["resources"] for rule in rules)


def test_namespace_permissions(rbac: dict[tuple[str, str], dict[str, Any]]) -> None:
    rules = namespace_rules(rbac)
    for request in [
        ("", "secrets", "get", "kadmit-webhook-server-cert"),
        ("", "secrets", "create", None),
        ("", "secrets", "update", "kadmit-webhook-server-cert"),
        ("", "secrets", "get", "worker1-secret"),
        ("coordination.k8s.io", "leases", "create", None),
        ("coordination.k8s.io", "leases", "update", "kadmit-controller-manager"),
    ]:
        assert allows(rules, request), request
    assert not allows(rules, ("", "secrets", "delete", "kadmit-webhook-server-cert"))
