"""kadmit's admission webhook configurations, with Kueue's webhook names and paths.

Every webhook is ``failurePolicy: Fail``: when kadmit is down, no Job slips past admission
unsuspended. The Job webhooks skip ``kube-system`` and ``kadmit-system`` so that an outage of
kadmit never blocks the cluster's own Jobs nor kadmit's recovery (Kueue #5244).
"""

from __future__ import annotations

from typing import Any

#: The Kueue kinds with a defaulting and a validating webhook (lower case, as in the paths).
KUEUE_WEBHOOK_KINDS = (
    "clusterqueue",
    "localqueue",
    "resourceflavor",
    "cohort",
    "workload",
    "admissioncheck",
    "workloadpriorityclass",
)
PLURALS = {
    "clusterqueue": "clusterqueues",
    "localqueue": "localqueues",
    "resourceflavor": "resourceflavors",
    "cohort": "cohorts",
    "workload": "workloads",
    "admissioncheck": "admissionchecks",
    "workloadpriorityclass": "workloadpriorityclasses",
}
MUTATING_NAME = "kadmit-mutating-webhook-configuration"
VALIDATING_NAME = "kadmit-validating-webhook-configuration"
PROTECTED_NAMESPACES = ["kube-system", "kadmit-system"]


def _webhook(
    name: str,
    path: str,
    rule: dict[str, Any],
    service: dict[str, Any],
    *,
    namespace_selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {**service, "path": path}},
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
    }
    if namespace_selector is not None:
        hook["namespaceSelector"] = namespace_selector
    hook["rules"] = [rule]
    hook["sideEffects"] = "None"
    hook["timeoutSeconds"] = 10
    return hook


def _job_namespace_selector() -> dict[str, Any]:
    return {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(PROTECTED_NAMESPACES)}
        ]
    }


def _rule(group: str, version: str, resources: list[str], operations: list[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "apiVersions": [version], "operations": operations, "resources": resources}


def mutating(service: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    hooks = [
        _webhook(
            "mjob.kb.io",
            "/mutate-batch-v1-job",
            _rule("batch", "v1", ["jobs"], ["CREATE"]),
            service,
            namespace_selector=_job_namespace_selector(),
        )
    ]
    for kind in KUEUE_WEBHOOK_KINDS:
        hooks.append(
            _webhook(
                f"m{kind}.kb.io",
                f"/mutate-kueue-x-k8s-io-v1beta2-{kind}",
                _rule("kueue.x-k8s.io", "v1beta2", [PLURALS[kind]], ["CREATE"]),
                service,
            )
        )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": MUTATING_NAME, "labels": dict(labels)},
        "webhooks": hooks,
    }


def validating(service: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    hooks = [
        _webhook(
            "vjob.kb.io",
            "/validate-batch-v1-job",
            _rule("batch", "v1", ["jobs"], ["CREATE", "UPDATE"]),
            service,
            namespace_selector=_job_namespace_selector(),
        )
    ]
    for kind in KUEUE_WEBHOOK_KINDS:
        resources = [PLURALS[kind]]
        if kind == "workload":
            # status writes carry the admission, the checks' podSetUpdates and reclaimable pods
            resources.append("workloads/status")
        hooks.append(
            _webhook(
                f"v{kind}.kb.io",
                f"/validate-kueue-x-k8s-io-v1beta2-{kind}",
                _rule("kueue.x-k8s.io", "v1beta2", resources, ["CREATE", "UPDATE"]),
                service,
            )
        )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": VALIDATING_NAME, "labels": dict(labels)},
        "webhooks": hooks,
    }
