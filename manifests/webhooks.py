"""kadmit's admission webhook configurations, with Kueue's webhook names and paths.

Every webhook is ``failurePolicy: Fail``: when kadmit is down, no Job slips past admission
unsuspended. The Job, JobSet and Pod webhooks skip ``kube-system`` and ``kadmit-system`` so that an
outage of kadmit never blocks the cluster's own Jobs nor kadmit's recovery (Kueue #5244).
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


#: The job kinds kadmit admits, as (API group, version, kind in lower case); each webhook's name
#: and path follow from these as kubebuilder makes them (``mjob.kb.io``, ``/mutate-batch-v1-job``),
#: the names kadmit's webhook server serves (``webhook/jobs.py`` ``FrameworkWebhooks``).
JOB_KINDS = (
    ("batch", "v1", "job"),
    ("jobset.x-k8s.io", "v1alpha2", "jobset"),
    ("", "v1", "pod"),
    ("apps", "v1", "deployment"),
    ("apps", "v1", "statefulset"),
    ("leaderworkerset.x-k8s.io", "v1", "leaderworkerset"),
    *(("kubeflow.org", "v1", kind) for kind in ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob")),
    ("kubeflow.org", "v2beta1", "mpijob"),
    ("trainer.kubeflow.org", "v1alpha1", "trainjob"),
    ("ray.io", "v1", "rayjob"),
    ("ray.io", "v1", "raycluster"),
    ("workload.codeflare.dev", "v1beta2", "appwrapper"),
)


def _job_hooks(prefix: str, operations: list[str], service: dict[str, Any]) -> list[dict[str, Any]]:
    action = "mutate" if prefix == "m" else "validate"
    return [
        _webhook(
            f"{prefix}{kind}.kb.io",
            f"/{action}-{group.replace('.', '-')}-{version}-{kind}",
            _rule(group, version, [f"{kind}s"], list(operations)),
            service,
            namespace_selector=_job_namespace_selector(),
        )
        for group, version, kind in JOB_KINDS
    ]


def mutating(service: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return _configuration("m", ["CREATE"], service, labels)


def validating(service: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return _configuration("v", ["CREATE", "UPDATE"], service, labels)


def _configuration(prefix: str, operations: list[str], service: dict[str, Any],
                   labels: dict[str, str]) -> dict[str, Any]:
    """kadmit's Mutating (``m``) or Validating (``v``) WebhookConfiguration: the job kinds, then Kueue's."""
    mutate = prefix == "m"
    hooks = _job_hooks(prefix, operations, service)
    for kind in KUEUE_WEBHOOK_KINDS:
        resources = [PLURALS[kind]]
        if kind == "workload" and not mutate:
            # status writes carry the admission, the checks' podSetUpdates and reclaimable pods
            resources.append("workloads/status")
        hooks.append(
            _webhook(
                f"{prefix}{kind}.kb.io",
                f"/{'mutate' if mutate else 'validate'}-kueue-x-k8s-io-v1beta2-{kind}",
                _rule("kueue.x-k8s.io", "v1beta2", resources, list(operations)),
                service,
            )
        )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration" if mutate else "ValidatingWebhookConfiguration",
        "metadata": {"name": MUTATING_NAME if mutate else VALIDATING_NAME, "labels": dict(labels)},
        "webhooks": hooks,
    }
