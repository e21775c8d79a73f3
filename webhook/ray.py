"""The KubeRay webhooks, ``ray.io/v1`` RayJob and RayCluster (Kueue's ``rayjob_webhook.go`` and
``raycluster_webhook.go``).

Mutating (``/mutate-ray-io-v1-rayjob``, ``/mutate-ray-io-v1-raycluster``, CREATE) and validating
(``/validate-ray-io-v1-...``, CREATE and UPDATE) do what the Job webhooks do for every job kind:
default the LocalQueue and priority class, suspend a managed object, hand a MultiKueue one to
MultiKueue, and keep anyone but kadmit from starting one whose Workload is not admitted. The kind's
own rules, with Kueue's messages, apply to a Kueue-managed object (one with a queue name, or any
when ``manageJobsWithoutQueueName``): no in-tree autoscaling (an elastic RayCluster may autoscale,
but not one MultiKueue dispatches), at most 18 pod sets, no worker group named ``head``; a RayJob
must bring its own cluster (``rayClusterSpec``, not ``clusterSelector``) and delete it when it ends
(``shutdownAfterJobFinishes``). An update is checked when the new or the old object has a queue
name (Kueue's ``ValidateRayAndSparkJobUpdates``, on by default).

One departure: a RayJob that runs on an existing cluster (``clusterSelector``) is not suspended.
Kueue's reconciler skips such a job, so suspending it would leave it suspended for good.
"""

from __future__ import annotations

from typing import Any

from kadmit.webhook.fielderrors import ROOT, FieldError, Path, forbidden, invalid, required, too_many
from kadmit.webhook.jobs import (
    ELASTIC_GATE,
    ELASTIC_JOB_ANNOTATION,
    MULTIKUEUE_CONTROLLER,
    QUEUE_LABEL,
    JobWebhooks,
    is_elastic,
    validate_managed_create,
    with_elastic_gate,
)
from kadmit.webhook.objects import mapping as _m
from kadmit.webhook.tas import validate_tas_annotations
from kadmit.workload import Obj, ray_worker_count

RAY_GROUP = "ray.io"
KUBERAY_CONTROLLER = "ray.io/kuberay-operator"
HEAD = "head"
MAX_POD_SETS = 18


def _queue(obj: Obj) -> str:
    value = _m(_m(obj.get("metadata")).get("labels")).get(QUEUE_LABEL)
    return value if isinstance(value, str) else ""


def _groups(cluster_spec: Obj) -> list[Obj]:
    groups = cluster_spec.get("workerGroupSpecs")
    return [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []



def validate_cluster_spec(
    cluster_spec: Obj, path: Path, autoscaling_message: str, elastic: bool
) -> list[FieldError]:
    """Kueue's rules for the cluster a managed RayCluster or RayJob runs (``raycluster.ValidateCreate``)."""
    errors: list[FieldError] = []
    autoscale = cluster_spec.get("enableInTreeAutoscaling")
    if autoscale is True and not elastic:
        errors.append(invalid(path.child("enableInTreeAutoscaling"), autoscale, autoscaling_message))
    groups = _groups(cluster_spec)
    if len(groups) + 1 > MAX_POD_SETS:
        errors.append(too_many(path.child("workerGroupSpecs"), len(groups) + 1, MAX_POD_SETS))
    for i, group in enumerate(groups):
        if group.get("groupName") == HEAD:
            errors.append(
                forbidden(
                    path.child("workerGroupSpecs").index(i).child("groupName"),
                    f'"{HEAD}" is reserved for the head group',
                )
            )
    return errors


def validate_cluster_tas(cluster_spec: Obj, path: Path) -> list[FieldError]:
    """The topology annotations of the head and of every worker group's template."""
    head_meta = _m(_m(_m(cluster_spec.get("headGroupSpec")).get("template")).get("metadata"))
    errors = validate_tas_annotations(
        {str(k): str(v) for k, v in _m(head_meta.get("annotations")).items()},
        path.child("headGroupSpec", "template", "metadata"),
        1,
    )
    for i, group in enumerate(_groups(cluster_spec)):
        meta = _m(_m(group.get("template")).get("metadata"))
        errors += validate_tas_annotations(
            {str(k): str(v) for k, v in _m(meta.get("annotations")).items()},
            path.child("workerGroupSpecs").index(i).child("template", "metadata"),
            ray_worker_count(group),
        )
    return errors


RAYJOB_AUTOSCALING = "a kueue managed job should only use autoscaling when workload slicing is enabled"
RAYCLUSTER_AUTOSCALING = (
    "a kueue-managed RayCluster can use autoscaling only as an elastic job: enable the "
    f'ElasticJobsViaWorkloadSlices feature gate and set the "{ELASTIC_JOB_ANNOTATION}": "true" annotation'
)


def validate_rayjob_create(rayjob: Obj, managed: bool) -> list[FieldError]:
    """Kueue's ``RayJobWebhook.validateCreate``; ``managed``: it has a queue name, or
    ``manageJobsWithoutQueueName``."""
    errors: list[FieldError] = []
    if managed:
        spec = _m(rayjob.get("spec"))
        spec_path = ROOT.child("spec")
        selector = spec.get("clusterSelector")
        has_selector = bool(selector)
        cluster_spec = spec.get("rayClusterSpec")
        if has_selector and cluster_spec is not None:
            return [
                invalid(
                    spec_path.child("clusterSelector"),
                    selector,
                    "a kueue managed job should not use an existing cluster",
                )
            ]
        if has_selector:
            return []  # on an existing cluster: not Kueue's to manage
        if cluster_spec is None:
            return [
                required(
                    spec_path.child("rayClusterSpec"),
                    "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector",
                )
            ]
        if not spec.get("shutdownAfterJobFinishes"):
            errors.append(
                invalid(
                    spec_path.child("shutdownAfterJobFinishes"),
                    bool(spec.get("shutdownAfterJobFinishes")),
                    "a kueue managed job should delete the cluster after finishing",
                )
            )
        errors += validate_cluster_spec(
            _m(cluster_spec), spec_path.child("rayClusterSpec"), RAYJOB_AUTOSCALING, is_elastic(rayjob)
        )
    errors += validate_managed_create(rayjob)
    cluster_spec = _m(_m(rayjob.get("spec")).get("rayClusterSpec"))
    if cluster_spec:
        errors += validate_cluster_tas(cluster_spec, ROOT.child("spec", "rayClusterSpec"))
    return errors


def validate_raycluster_create(cluster: Obj, managed: bool) -> list[FieldError]:
    """Kueue's ``RayClusterWebhook.validateCreate`` (an elastic cluster: its scheduling gates)."""
    errors: list[FieldError] = []
    spec = _m(cluster.get("spec"))
    if managed:
        elastic = is_elastic(cluster)
        errors += validate_cluster_spec(spec, ROOT.child("spec"), RAYCLUSTER_AUTOSCALING, elastic)
        if elastic:
            errors += _elastic_gates(spec)
            if spec.get("enableInTreeAutoscaling") is True and spec.get("managedBy") == MULTIKUEUE_CONTROLLER:
                errors.append(  # Kueue: MultiKueue does not support Ray autoscaling yet
                    forbidden(
                        ROOT.child("spec", "enableInTreeAutoscaling"),
                        "in-tree autoscaling is not supported for a MultiKueue-managed elastic RayCluster",
                    )
                )
    errors += validate_managed_create(cluster)
    errors += validate_cluster_tas(spec, ROOT.child("spec"))
    return errors


def _elastic_gates(spec: Obj) -> list[FieldError]:
    errors: list[FieldError] = []

    def gated(template: Obj) -> tuple[bool, Any]:
        gates = _m(template.get("spec")).get("schedulingGates")
        present = isinstance(gates, list) and {"name": ELASTIC_GATE} in gates
        return present, gates

    for i, group in enumerate(_groups(spec)):
        ok, gates = gated(_m(group.get("template")))
        if not ok:
            errors.append(
                invalid(
                    ROOT.child("spec", "workerGroupSpecs")
                    .index(i)
                    .child("template", "spec", "schedulingGates"),
                    gates,
                    "an elastic job must have the ElasticJobSchedulingGate",
                )
            )
    ok, gates = gated(_m(_m(spec.get("headGroupSpec")).get("template")))
    if not ok:
        errors.append(
            invalid(
                ROOT.child("spec", "headGroupSpec", "template", "spec", "schedulingGates"),
                gates,
                "an elastic job must have the ElasticJobSchedulingGate",
            )
        )
    return errors


class _RayWebhooks(JobWebhooks):
    default_managed_by = KUBERAY_CONTROLLER

    def managed(self, job: Obj) -> bool:
        return self.config.manage_jobs_without_queue_name or bool(_queue(job))

    def field_errors(self, job: Obj, old: Obj | None, default_queue_exists: bool) -> list[FieldError]:
        if old is None:
            return self.create_errors(job)
        if not (self.managed(job) or _queue(old)):
            return []  # Kueue's ShouldValidateRayOrSparkJobOnUpdate
        return self.update_errors(old, job, default_queue_exists) + self.create_errors(job)


class RayJobWebhooks(_RayWebhooks):
    """The RayJob handlers."""

    gvk = (RAY_GROUP, "v1", "RayJob")

    async def is_managed(self, job: Obj, namespace: str) -> bool:
        if _m(job.get("spec")).get("clusterSelector"):
            return False  # runs on an existing cluster: kadmit never admits it, so never holds it
        return await super().is_managed(job, namespace)

    def create_errors(self, job: Obj) -> list[FieldError]:
        return validate_rayjob_create(job, self.managed(job))


class RayClusterWebhooks(_RayWebhooks):
    """The RayCluster handlers; a RayJob's own RayCluster is its owner's (not managed on its own)."""

    gvk = (RAY_GROUP, "v1", "RayCluster")

    def create_errors(self, job: Obj) -> list[FieldError]:
        return validate_raycluster_create(job, self.managed(job))

    async def default(self, cluster: Obj, namespace: str) -> Obj:
        """The shared defaulting, then an elastic cluster's head and worker Pods gated (Kueue's
        ``RayClusterWebhook.Default``): each starts once the cluster's Workload slice grants it."""
        cluster = await super().default(cluster, namespace)
        if is_elastic(cluster):
            cluster["spec"] = gate_cluster_spec(_m(cluster.get("spec")))
        return cluster


def gate_cluster_spec(spec: Obj) -> Obj:
    """``spec`` with the head group's and every worker group's pod template gated (copy on write)."""
    gated = dict(spec)
    if isinstance(spec.get("headGroupSpec"), dict):
        gated["headGroupSpec"] = with_elastic_gate(spec["headGroupSpec"], "template")
    groups = spec.get("workerGroupSpecs")
    if isinstance(groups, list):
        gated["workerGroupSpecs"] = [
            with_elastic_gate(g, "template") if isinstance(g, dict) else g for g in groups
        ]
    return gated
