"""What the API server fills in a batch/v1 Job before anyone reads it, for ``kadmit simulate``.

Kubernetes' ``SetDefaults_Job`` and ``SetDefaults_PodSpec`` (pkg/apis/batch/v1 and core/v1
defaults.go): the job reconciler only ever reads stored Jobs, so a simulated Workload must be
built from a Job defaulted the same way. Written for kadmit, from Kubernetes' rules: the local
cluster has its own implementation, and the two are meant to agree (the simulate-vs-reconciler
test compares them).
"""

from __future__ import annotations

from kadmit.kube import Obj

_POD_SPEC = {"dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
             "terminationGracePeriodSeconds": 30}
_CONTAINER = {"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
_JOB = {"completionMode": "NonIndexed", "suspend": False}
_INT32_MAX = 2**31 - 1


def pull_policy(image: str) -> str:
    """``Always`` for an untagged or ``:latest`` image (not pinned by digest), else ``IfNotPresent``."""
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    tag = last.partition(":")[2]
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def default_pod_spec(spec: Obj) -> None:
    for key, value in _POD_SPEC.items():
        spec.setdefault(key, value)
    spec.setdefault("securityContext", {})
    containers = [c for key in ("initContainers", "containers") for c in spec.get(key) or []
                  if isinstance(c, dict)]
    for container in containers:
        for key, value in _CONTAINER.items():
            container.setdefault(key, value)
        container.setdefault("imagePullPolicy", pull_policy(str(container.get("image", ""))))
        container.setdefault("resources", {})
        for port in container.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")


def default_job(job: Obj) -> None:
    """Fill ``job`` in place as the API server stores it (its ``metadata.uid`` labels the pods)."""
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    per_index = spec.get("backoffLimitPerIndex") is not None
    spec.setdefault("backoffLimit", _INT32_MAX if per_index else 6)
    for key, value in _JOB.items():
        spec.setdefault(key, value)
    if spec.get("manualSelector") is None:
        spec.pop("manualSelector", None)
    if "podFailurePolicy" not in spec:
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    template = spec.setdefault("template", {})
    if isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"])  # a Job's pods have no restartPolicy default
    if spec.get("manualSelector"):
        return
    meta = job["metadata"]
    uid, name = meta.get("uid", ""), meta["name"]
    spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    for key, value in (("batch.kubernetes.io/controller-uid", uid), ("batch.kubernetes.io/job-name", name),
                       ("controller-uid", uid), ("job-name", name)):
        labels.setdefault(key, value)
