"""The webhook configurations carry the names and paths every part of kadmit agreed on."""

from __future__ import annotations

from typing import Any

import pytest

from tests.manifests.conftest import MANIFESTS, load_documents

KINDS = [
    "clusterqueue",
    "localqueue",
    "resourceflavor",
    "cohort",
    "workload",
    "admissioncheck",
    "workloadpriorityclass",
]
PROTECTED = {
    "matchExpressions": [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "kadmit-system"],
        }
    ]
}


@pytest.fixture(scope="module")
def configurations() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in load_documents(MANIFESTS / "base" / "webhooks.yaml")}


def hooks(configurations: dict[str, dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {hook["name"]: hook for hook in configurations[kind]["webhooks"]}


def test_names_and_labels(configurations: dict[str, dict[str, Any]]) -> None:
    assert (
        configurations["MutatingWebhookConfiguration"]["metadata"]["name"]
        == "kadmit-mutating-webhook-configuration"
    )
    assert (
        configurations["ValidatingWebhookConfiguration"]["metadata"]["name"]
        == "kadmit-validating-webhook-configuration"
    )
    for doc in configurations.values():
        assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "kadmit"


#: Kueue's kubebuilder markers name these paths (pkg/controller/jobs/kubeflow/jobs/*).
TRAINING_OPERATOR = ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob")


def test_paths(configurations: dict[str, dict[str, Any]]) -> None:
    expected_mutating = {
        "mjob.kb.io": "/mutate-batch-v1-job",
        "mjobset.kb.io": "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        "mpod.kb.io": "/mutate--v1-pod",  # Kueue's path for the core group's Pods
        "mdeployment.kb.io": "/mutate-apps-v1-deployment",
        "mstatefulset.kb.io": "/mutate-apps-v1-statefulset",
        "mleaderworkerset.kb.io": "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
        "mmpijob.kb.io": "/mutate-kubeflow-org-v2beta1-mpijob",
        "mtrainjob.kb.io": "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        "mrayjob.kb.io": "/mutate-ray-io-v1-rayjob",  # Kueue's names and paths
        "mraycluster.kb.io": "/mutate-ray-io-v1-raycluster",
        "mappwrapper.kb.io": "/mutate-workload-codeflare-dev-v1beta2-appwrapper",
    } | {f"m{k}.kb.io": f"/mutate-kueue-x-k8s-io-v1beta2-{k}" for k in KINDS} | {
        f"m{k}.kb.io": f"/mutate-kubeflow-org-v1-{k}" for k in TRAINING_OPERATOR
    }
    expected_validating = {
        "vjob.kb.io": "/validate-batch-v1-job",
        "vjobset.kb.io": "/validate-jobset-x-k8s-io-v1alpha2-jobset",
        "vpod.kb.io": "/validate--v1-pod",
        "vdeployment.kb.io": "/validate-apps-v1-deployment",
        "vstatefulset.kb.io": "/validate-apps-v1-statefulset",
        "vleaderworkerset.kb.io": "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
        "vmpijob.kb.io": "/validate-kubeflow-org-v2beta1-mpijob",
        "vtrainjob.kb.io": "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
        "vrayjob.kb.io": "/validate-ray-io-v1-rayjob",
        "vraycluster.kb.io": "/validate-ray-io-v1-raycluster",
        "vappwrapper.kb.io": "/validate-workload-codeflare-dev-v1beta2-appwrapper",
    } | {f"v{k}.kb.io": f"/validate-kueue-x-k8s-io-v1beta2-{k}" for k in KINDS} | {
        f"v{k}.kb.io": f"/validate-kubeflow-org-v1-{k}" for k in TRAINING_OPERATOR
    }
    for kind, expected in [
        ("MutatingWebhookConfiguration", expected_mutating),
        ("ValidatingWebhookConfiguration", expected_validating),
    ]:
        found = {
            name: hook["clientConfig"]["service"]["path"]
            for name, hook in hooks(configurations, kind).items()
        }
        assert found == expected


def test_every_webhook_fails_closed_through_the_service(configurations: dict[str, dict[str, Any]]) -> None:
    for doc in configurations.values():
        for hook in doc["webhooks"]:
            assert hook["failurePolicy"] == "Fail", hook["name"]
            assert hook["sideEffects"] == "None"
            assert hook["admissionReviewVersions"] == ["v1"]
            assert hook["timeoutSeconds"] == 10
            service = hook["clientConfig"]["service"]
            assert (service["name"], service["namespace"], service["port"]) == (
                "kadmit-webhook-service",
                "kadmit-system",
                443,
            )
            assert "caBundle" not in hook["clientConfig"]


@pytest.mark.parametrize(
    ("name", "group", "version", "plural"),
    [
        ("job", "batch", "v1", "jobs"),
        ("jobset", "jobset.x-k8s.io", "v1alpha2", "jobsets"),
        ("pod", "", "v1", "pods"),
        ("deployment", "apps", "v1", "deployments"),
        ("statefulset", "apps", "v1", "statefulsets"),
        ("leaderworkerset", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
        ("rayjob", "ray.io", "v1", "rayjobs"),
        ("raycluster", "ray.io", "v1", "rayclusters"),
        ("appwrapper", "workload.codeflare.dev", "v1beta2", "appwrappers"),
    ],
)
def test_job_webhooks_skip_system_namespaces_and_match_their_kind(
    configurations: dict[str, dict[str, Any]], name: str, group: str, version: str, plural: str
) -> None:
    mutating = hooks(configurations, "MutatingWebhookConfiguration")[f"m{name}.kb.io"]
    validating = hooks(configurations, "ValidatingWebhookConfiguration")[f"v{name}.kb.io"]
    for hook, operations in [(mutating, ["CREATE"]), (validating, ["CREATE", "UPDATE"])]:
        assert hook["namespaceSelector"] == PROTECTED
        assert hook["rules"] == [
            {"apiGroups": [group], "apiVersions": [version], "operations": operations, "resources": [plural]}
        ]


def test_kueue_webhooks_match_their_resource(configurations: dict[str, dict[str, Any]]) -> None:
    vworkload = hooks(configurations, "ValidatingWebhookConfiguration")["vworkload.kb.io"]
    assert vworkload["rules"][0]["resources"] == ["workloads", "workloads/status"]
    vcq = hooks(configurations, "ValidatingWebhookConfiguration")["vclusterqueue.kb.io"]
    assert vcq["rules"] == [
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "apiVersions": ["v1beta2"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["clusterqueues"],
        }
    ]
    mwpc = hooks(configurations, "MutatingWebhookConfiguration")["mworkloadpriorityclass.kb.io"]
    assert mwpc["rules"][0]["resources"] == ["workloadpriorityclasses"]


def test_kadmits_webhook_server_serves_every_configured_path(
    configurations: dict[str, dict[str, Any]],
) -> None:
    """Each configured webhook reaches a path kadmit serves, for the group/version its rules send."""
    app = pytest.importorskip("kadmit.webhook.app")
    served = {hook.path: hook for hook in app.all_webhooks(None)}
    configured = [hook for doc in configurations.values() for hook in doc["webhooks"]]
    assert {hook["clientConfig"]["service"]["path"] for hook in configured} == set(served)
    for hook in configured:
        kinds = served[hook["clientConfig"]["service"]["path"]].kinds
        for rule in hook["rules"]:
            for group in rule["apiGroups"]:
                for version in rule["apiVersions"]:
                    assert any(g == group and v == version for g, v, _ in kinds), hook["name"]


def test_crd_conversion_goes_to_kadmits_convert_path(crds: dict[str, dict[str, Any]]) -> None:
    app = pytest.importorskip("kadmit.webhook.app")
    paths = {
        crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["path"]
        for crd in crds.values()
        if crd["spec"].get("conversion", {}).get("strategy") == "Webhook"
    }
    assert paths == {app.CONVERT_PATH}
