"""The KubeRay integrations, ``ray.io/v1`` RayCluster and RayJob (Kueue's ``pkg/controller/jobs/
raycluster`` and ``rayjob``).

A Ray cluster is one pod set ``head`` (one pod, from ``headGroupSpec.template``) and one pod set per
worker group, named after it, counting ``replicas`` (1 when unset) times ``numOfHosts`` when that is
above 1. Kueue counts ``replicas``, never ``minReplicas``: a Kueue-managed cluster may not autoscale
(the webhooks refuse ``enableInTreeAutoscaling`` unless the job is an elastic one), so the quota it
reserves is what the cluster asks for. The head pod set carries what KubeRay adds to the head pod
at build time, so that the quota is what the pods will request: the autoscaler sidecar when in-tree
autoscaling is on, and, with GCS fault tolerance, the Redis cleanup Job's requests (at least
200m cpu and 256Mi memory on the Ray container).

A RayJob's pod sets are its ``rayClusterSpec``'s, then, in ``K8sJobMode`` (the CRD's default), one
pod ``submitter`` from ``submitterPodTemplate`` or KubeRay's default submitter template; in
``SidecarMode`` the submitter container KubeRay injects into the head pod is counted in the head pod
set. Starting a RayJob whose submitter template is KubeRay's default writes that template (with the
admitted flavor) into ``spec.submitterPodTemplate``, as Kueue does. A RayJob that runs on an
existing cluster (``clusterSelector``) is not Kueue's to manage.

A RayCluster never finishes; it is active and ready while ``status.state`` is ``ready``. A RayJob
finishes when ``jobDeploymentStatus`` is ``Complete`` or ``Failed`` (succeeded if ``jobStatus`` is
``SUCCEEDED``), and is active unless that status is empty or ``Suspended``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from fractions import Fraction

from kadmit.controller.jobs.integration import Finished, JobIntegration, workload_template
from kadmit.engine.quantity import QuantityError, parse_exact
from kadmit.kube import Obj
from kadmit.kube.resources import RAY_CLUSTERS, RAY_JOBS
from kadmit.webhook.objects import mapping as _m
from kadmit.workload import ray_worker_count

HEAD = "head"
SUBMITTER = "submitter"
RAY_GROUP = "ray.io"
KUBERAY_CONTROLLER = "ray.io/kuberay-operator"
SUBMITTER_CONTAINER = "ray-job-submitter"
AUTOSCALER_CONTAINER = "autoscaler"
FT_ENABLED_ANNOTATION = "ray.io/ft-enabled"
ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
MAX_POD_SETS = 18  # Kueue's jobframework.MaxPodSets: what a Workload holds
K8S_JOB_MODE = "K8sJobMode"
SIDECAR_MODE = "SidecarMode"
READY = "ready"

# KubeRay's defaults (ray-operator/controllers/ray/common): the submitter container's resources,
# the autoscaler sidecar's, and the Redis cleanup Job's requests.
SUBMITTER_RESOURCES: Obj = {
    "limits": {"cpu": "1", "memory": "1Gi"},
    "requests": {"cpu": "500m", "memory": "200Mi"},
}
AUTOSCALER_RESOURCES: Obj = {
    "limits": {"cpu": "500m", "memory": "512Mi"},
    "requests": {"cpu": "500m", "memory": "512Mi"},
}
REDIS_CLEANUP_REQUESTS = {"cpu": "200m", "memory": "256Mi"}


worker_count = ray_worker_count  # Kueue's ``effectiveWorkerCount``


def expected_pod_sets(cluster_spec: Obj) -> int:
    return len(cluster_spec.get("workerGroupSpecs") or []) + 1


def autoscaling(cluster_spec: Obj) -> bool:
    return cluster_spec.get("enableInTreeAutoscaling") is True


def gcs_fault_tolerance(cluster_spec: Obj, annotations: dict[str, str]) -> bool:
    """KubeRay's ``IsGCSFaultToleranceEnabled``: the annotation, or ``gcsFaultToleranceOptions``."""
    return annotations.get(FT_ENABLED_ANNOTATION, "").lower() == "true" or bool(
        cluster_spec.get("gcsFaultToleranceOptions")
    )


def _keep_max(requests: Obj, floor: dict[str, str]) -> Obj:
    result = dict(requests)
    for name, value in floor.items():
        try:
            current: Fraction | None = parse_exact(result[name]) if name in result else None
        except QuantityError:
            current = None
        if current is None or current < parse_exact(value):
            result[name] = value
    return result


def cluster_pod_sets(cluster_spec: Obj, annotations: dict[str, str]) -> list[Obj]:
    """Kueue's ``raycluster.BuildPodSets``: head first, then one pod set per worker group."""
    head = workload_template(_m(_m(cluster_spec.get("headGroupSpec")).get("template")))
    containers = head.setdefault("spec", {}).setdefault("containers", [])
    if gcs_fault_tolerance(cluster_spec, annotations):
        if not containers:
            raise ValueError(
                "cannot account for Redis cleanup resources: head pod template must include the Ray container"
            )
        resources = containers[0].setdefault("resources", {})
        resources["requests"] = _keep_max(_m(resources.get("requests")), REDIS_CLEANUP_REQUESTS)
    if autoscaling(cluster_spec):
        options = _m(cluster_spec.get("autoscalerOptions"))
        resources = copy.deepcopy(options.get("resources") or AUTOSCALER_RESOURCES)
        containers.append({"name": AUTOSCALER_CONTAINER, "resources": resources})
    pod_sets: list[Obj] = [{"name": HEAD, "count": 1, "template": head}]
    for group in cluster_spec.get("workerGroupSpecs") or []:
        pod_sets.append(
            {
                "name": str(group.get("groupName", "")),
                "count": worker_count(group),
                "template": workload_template(_m(group.get("template"))),
            }
        )
    return pod_sets


def cluster_templates(cluster_spec: Obj) -> dict[str, Obj]:
    """Pod-set name → the pod template inside ``cluster_spec`` (the same dicts, for in-place edits)."""
    result = {HEAD: cluster_spec.setdefault("headGroupSpec", {}).setdefault("template", {})}
    for group in cluster_spec.get("workerGroupSpecs") or []:
        result[str(group.get("groupName", ""))] = group.setdefault("template", {})
    return result


def _annotations(obj: Obj) -> dict[str, str]:
    return {str(k): str(v) for k, v in _m(_m(obj.get("metadata")).get("annotations")).items()}


class RayClusterIntegration(JobIntegration):
    framework = "ray.io/raycluster"
    resource = RAY_CLUSTERS
    group = RAY_GROUP
    kind = "RayCluster"

    def templates(self, cluster: Obj) -> dict[str, Obj]:
        return cluster_templates(cluster.setdefault("spec", {}))

    def pod_sets(self, cluster: Obj) -> list[Obj]:
        return cluster_pod_sets(_m(cluster.get("spec")), _annotations(cluster))

    def is_active(self, cluster: Obj) -> bool:
        return _m(cluster.get("status")).get("state") == READY

    def finished(self, cluster: Obj) -> Finished | None:
        return None  # a Ray cluster serves until it is deleted

    def pods_ready(self, cluster: Obj) -> bool:
        return _m(cluster.get("status")).get("state") == READY


def submission_mode(rayjob: Obj) -> str:
    """``spec.submissionMode``, K8sJobMode when unset (the CRD's default)."""
    return str(_m(rayjob.get("spec")).get("submissionMode") or K8S_JOB_MODE)


def default_submitter_template(rayjob: Obj) -> Obj:
    """KubeRay's default submitter pod template (``GetDefaultSubmitterTemplate``), as Kueue copies it:
    the head's image, the default resources, ``restartPolicy: Never``."""
    head = _m(_m(_m(_m(rayjob.get("spec")).get("rayClusterSpec")).get("headGroupSpec")).get("template"))
    containers = _m(head.get("spec")).get("containers") or [{}]
    image = str(_m(containers[0]).get("image", ""))
    return {
        "spec": {
            "containers": [
                {"name": SUBMITTER_CONTAINER, "image": image, "resources": copy.deepcopy(SUBMITTER_RESOURCES)}
            ],
            "restartPolicy": "Never",
        }
    }


def submitter_template(rayjob: Obj) -> Obj:
    template = _m(rayjob.get("spec")).get("submitterPodTemplate")
    return template if isinstance(template, dict) else default_submitter_template(rayjob)


class RayJobIntegration(JobIntegration):
    framework = "ray.io/rayjob"
    resource = RAY_JOBS
    group = RAY_GROUP
    kind = "RayJob"

    def skip(self, rayjob: Obj) -> bool:
        return bool(_m(rayjob.get("spec")).get("clusterSelector"))

    def templates(self, rayjob: Obj) -> dict[str, Obj]:
        spec = rayjob.setdefault("spec", {})
        result = cluster_templates(spec.setdefault("rayClusterSpec", {}))
        if submission_mode(rayjob) == K8S_JOB_MODE:
            if not isinstance(spec.get("submitterPodTemplate"), dict):
                spec["submitterPodTemplate"] = default_submitter_template(rayjob)
            result[SUBMITTER] = spec["submitterPodTemplate"]
        return result

    def pod_sets(self, rayjob: Obj) -> list[Obj]:
        spec = _m(rayjob.get("spec"))
        pod_sets = cluster_pod_sets(_m(spec.get("rayClusterSpec")), _annotations(rayjob))
        mode = submission_mode(rayjob)
        if mode == K8S_JOB_MODE:
            template = workload_template(submitter_template(rayjob))
            pod_sets.append({"name": SUBMITTER, "count": 1, "template": template})
        elif mode == SIDECAR_MODE:
            head = pod_sets[0]["template"].setdefault("spec", {})
            head.setdefault("containers", []).append(
                {"name": SUBMITTER_CONTAINER, "resources": copy.deepcopy(SUBMITTER_RESOURCES)}
            )
        return pod_sets

    def restored(self, rayjob: Obj, pod_sets: Sequence[Obj]) -> Obj:
        result = super().restored(rayjob, pod_sets)
        if not isinstance(_m(rayjob.get("spec")).get("submitterPodTemplate"), dict):
            # Kueue restores KubeRay's default submitter template without writing it into the RayJob
            result["spec"].pop("submitterPodTemplate", None)
        return result

    def is_active(self, rayjob: Obj) -> bool:
        return _m(rayjob.get("status")).get("jobDeploymentStatus") not in (None, "", "Suspended")

    def finished(self, rayjob: Obj) -> Finished | None:
        status = _m(rayjob.get("status"))
        if status.get("jobDeploymentStatus") not in ("Complete", "Failed"):
            return None
        reason = "Succeeded" if status.get("jobStatus") == "SUCCEEDED" else "Failed"
        return Finished(reason, str(status.get("message") or ""))

    def pods_ready(self, rayjob: Obj) -> bool:
        return _m(_m(rayjob.get("status")).get("rayClusterStatus")).get("state") == READY
