"""The ``workload.codeflare.dev/v1beta2`` AppWrapper integration (Kueue's ``pkg/controller/jobs/
appwrapper``, which reads an AppWrapper through the AppWrapper project's ``pkg/utils``).

An AppWrapper wraps components (any Kubernetes objects, under ``spec.components[].template``) and is
one Workload for all of them. Its pod sets, in component order, come from ``status.componentStatus``
once the AppWrapper controller has filled it, else from each component's declared ``podSets``
(``path`` to a pod template inside the component, ``replicas``, 1 when unset), else from what
``InferPodSets`` infers for the kinds it knows: a Job (``min(parallelism, completions)``), a JobSet
(one per replicated job), a PyTorchJob (Master, Worker), a RayCluster or RayJob (head, worker
groups), a Pod, a Deployment or a StatefulSet (``replicas``). Pod set *i* is named
``<appwrapper>-<i>``; its template is the subset of the component's pod template that Kueue uses
(labels, annotations, containers, scheduling fields; ``restartPolicy`` defaulting to Always).

Nothing is injected into the templates: on start the admitted infos (labels, annotations,
nodeSelector, tolerations, scheduling gates) are written to ``spec.components[].podSetInfos`` and
the AppWrapper controller applies them to the components it creates; on stop they are cleared.
It is active while its ``QuotaReserved`` condition is true, ready with ``PodsReady``, finished in
phase ``Succeeded``, or ``Failed`` once its resources are gone.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from kadmit.controller.jobs.integration import STOPPING_ANNOTATION, Finished, JobIntegration
from kadmit.controller.jobs.podtemplate import PodSetInfo
from kadmit.kube import Obj
from kadmit.kube.resources import APPWRAPPERS
from kadmit.webhook.objects import mapping as _m

AW_GROUP = "workload.codeflare.dev"
AW_CONTROLLER = "workload.codeflare.dev/appwrapper-controller"
TEMPLATE = "template"
# What of a component's pod template makes the Workload's (the AppWrapper project's GetPodTemplateSpec).
POD_SPEC_FIELDS = (
    "initContainers",
    "containers",
    "restartPolicy",
    "nodeSelector",
    "nodeName",
    "affinity",
    "tolerations",
    "priorityClassName",
    "topologySpreadConstraints",
    "overhead",
)
CONTAINER_FIELDS = ("name", "image", "command", "args", "resources")


class PathError(ValueError):
    """A pod set's ``path`` does not lead to a pod template inside its component."""


_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def value_at(component: Obj, path: str) -> Any:
    """The AppWrapper project's ``getValueAtPath``: ``template.spec.template``,
    ``template.spec.workerGroupSpecs[0].template``; ``component`` holds ``template``."""
    if not path.startswith(TEMPLATE):
        raise PathError("first element of the path must be 'template'")
    cursor: Any = component.get(TEMPLATE)
    rest = path[len(TEMPLATE) :]
    while rest:
        step = _STEP.match(rest)
        if step is None:
            raise PathError(
                f"at path position {path[: len(path) - len(rest)]!r} invalid path element {rest!r}"
            )
        key, index = step.group(1), step.group(2)
        if key is not None:
            if not isinstance(cursor, dict) or key not in cursor:
                raise PathError(f"at path position {path!r} missing field {key!r}")
            cursor = cursor[key]
        else:
            if not isinstance(cursor, list) or int(index) >= len(cursor):
                raise PathError(f"at path position {path!r} out of bounds index {index}")
            cursor = cursor[int(index)]
        rest = rest[step.end() :]
    return cursor


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _has(component: Obj, path: str) -> bool:
    try:
        return isinstance(value_at(component, path), dict)
    except PathError:
        return False


def _ray_pod_sets(component: Obj, prefix: str) -> list[Obj]:
    pod_sets: list[Obj] = [{"replicas": 1, "path": f"{prefix}headGroupSpec.template"}]
    try:
        groups = value_at(component, f"{prefix}workerGroupSpecs")
    except PathError:
        groups = []
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        if isinstance(group, dict) and isinstance(group.get("template"), dict):
            pod_sets.append(
                {
                    "replicas": _int(group.get("replicas"), 1),
                    "path": f"{prefix}workerGroupSpecs[{i}].template",
                }
            )
    return pod_sets


def infer_pod_sets(component: Obj) -> list[Obj]:
    """The AppWrapper project's ``InferPodSets`` for the kinds it knows (``[]`` for others)."""
    template = _m(component.get(TEMPLATE))
    api_version, kind = template.get("apiVersion"), template.get("kind")
    spec = _m(template.get("spec"))
    if (api_version, kind) == ("batch/v1", "Job"):
        replicas = _int(spec.get("parallelism"), 1)
        completions = spec.get("completions")
        if isinstance(completions, int) and completions < replicas:
            replicas = completions
        return [{"replicas": replicas, "path": "template.spec.template"}]
    if (api_version, kind) == ("jobset.x-k8s.io/v1alpha2", "JobSet"):
        out = []
        for i, rj in enumerate(spec.get("replicatedJobs") or []):
            job_spec = _m(_m(_m(rj).get("template")).get("spec"))
            pods = _int(job_spec.get("parallelism"), 1)
            completions = job_spec.get("completions")
            if isinstance(completions, int) and completions < pods:
                pods = completions
            out.append(
                {
                    "replicas": _int(_m(rj).get("replicas"), 1) * pods,
                    "path": f"template.spec.replicatedJobs[{i}].template.spec.template",
                }
            )
        return out
    if (api_version, kind) == ("kubeflow.org/v1", "PyTorchJob"):
        out = []
        for replica_type in ("Master", "Worker"):
            prefix = f"template.spec.pytorchReplicaSpecs.{replica_type}."
            if _has(component, prefix + TEMPLATE):
                declared = _m(_m(spec.get("pytorchReplicaSpecs")).get(replica_type)).get("replicas")
                out.append({"replicas": _int(declared, 1), "path": prefix + TEMPLATE})
        return out
    if (api_version, kind) == ("ray.io/v1", "RayCluster"):
        return _ray_pod_sets(component, "template.spec.")
    if (api_version, kind) == ("ray.io/v1", "RayJob"):
        return _ray_pod_sets(component, "template.spec.rayClusterSpec.")
    if (api_version, kind) == ("v1", "Pod"):
        return [{"replicas": 1, "path": TEMPLATE}]
    if (api_version, kind) in (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")):
        return [{"replicas": _int(spec.get("replicas"), 1), "path": "template.spec.template"}]
    return []


def component_pod_sets(appwrapper: Obj) -> list[list[Obj]]:
    """Per component, its pod sets (Kueue's ``EnsureComponentStatusInitialized``): the status's
    when it covers every component, else the declared ones, else the inferred ones."""
    components = [_m(c) for c in _m(appwrapper.get("spec")).get("components") or []]
    statuses = _m(appwrapper.get("status")).get("componentStatus") or []
    if len(statuses) == len(components) and components:
        return [list(_m(s).get("podSets") or []) for s in statuses]
    return [list(c.get("podSets") or []) or infer_pod_sets(c) for c in components]


def workload_template(source: Obj) -> Obj:
    """The part of a component's pod template the Workload keeps (``GetPodTemplateSpec``)."""
    meta = _m(source.get("metadata"))
    spec = _m(source.get("spec"))
    out_meta = {k: copy.deepcopy(meta[k]) for k in ("labels", "annotations") if meta.get(k)}
    out_spec: Obj = {k: copy.deepcopy(spec[k]) for k in POD_SPEC_FIELDS if spec.get(k) is not None}
    for key in ("initContainers", "containers"):
        if key in out_spec:
            out_spec[key] = [
                {f: c[f] for f in CONTAINER_FIELDS if f in c} for c in out_spec[key] if isinstance(c, dict)
            ]
    out_spec.setdefault("restartPolicy", "Always")
    out_spec.setdefault("containers", [])
    return {"metadata": out_meta, "spec": out_spec} if out_meta else {"spec": out_spec}


class AppWrapperIntegration(JobIntegration):
    framework = "workload.codeflare.dev/appwrapper"
    resource = APPWRAPPERS
    group = AW_GROUP
    kind = "AppWrapper"

    def _entries(self, appwrapper: Obj) -> list[tuple[str, Obj, int]]:
        """(pod set name, the pod template inside the AppWrapper, count) in order; as Kueue, a pod
        set whose path leads to no template is left out."""
        name = str(_m(appwrapper.get("metadata")).get("name", ""))
        components = _m(appwrapper.get("spec")).get("components") or []
        out: list[tuple[str, Obj, int]] = []
        for component, pod_sets in zip(components, component_pod_sets(appwrapper), strict=False):
            for pod_set in pod_sets:
                try:
                    template = value_at(_m(component), str(_m(pod_set).get("path", "")))
                except PathError:
                    continue
                if isinstance(template, dict):
                    out.append((f"{name}-{len(out)}", template, _int(_m(pod_set).get("replicas"), 1)))
        return out

    def templates(self, appwrapper: Obj) -> dict[str, Obj]:
        return {name: template for name, template, _ in self._entries(appwrapper)}

    def pod_sets(self, appwrapper: Obj) -> list[Obj]:
        return [
            {"name": name, "count": count, "template": workload_template(template)}
            for name, template, count in self._entries(appwrapper)
        ]

    def run_with_pod_set_infos(self, appwrapper: Obj, infos: Sequence[PodSetInfo]) -> Obj:
        """Unsuspended, with each component's ``podSetInfos`` (Kueue's ``SetPodSetInfos``)."""
        result = copy.deepcopy(appwrapper)
        per_component = component_pod_sets(result)
        expected = sum(len(p) for p in per_component)
        if expected != len(infos):
            raise ValueError(f"expecting {expected} podsets, got {len(infos)}")
        flat = iter(infos)
        for component, pod_sets in zip(
            result.setdefault("spec", {}).get("components") or [], per_component, strict=False
        ):
            component["podSetInfos"] = [_aw_info(next(flat)) for _ in pod_sets]
        result["spec"]["suspend"] = False
        return result

    def restored(self, appwrapper: Obj, pod_sets: Sequence[Obj]) -> Obj:
        """Suspended, the ``podSetInfos`` cleared (Kueue's ``ClearPodSetInfos``), no stopping annotation."""
        result = copy.deepcopy(appwrapper)
        for component in result.setdefault("spec", {}).get("components") or []:
            if isinstance(component, dict):
                component.pop("podSetInfos", None)
        annotations = result["metadata"].get("annotations") or {}
        annotations.pop(STOPPING_ANNOTATION, None)
        if not annotations:
            result["metadata"].pop("annotations", None)
        result["spec"]["suspend"] = True
        return result

    def is_active(self, appwrapper: Obj) -> bool:
        return _condition(appwrapper, "QuotaReserved")

    def finished(self, appwrapper: Obj) -> Finished | None:
        phase = _m(appwrapper.get("status")).get("phase")
        if phase == "Succeeded":
            return Finished("Succeeded", "AppWrapper finished successfully")
        if phase == "Failed" and not _condition(appwrapper, "ResourcesDeployed"):
            return Finished("Failed", "AppWrapper failed")
        return None

    def pods_ready(self, appwrapper: Obj) -> bool:
        return _condition(appwrapper, "PodsReady")


def _condition(obj: Obj, kind: str) -> bool:
    conditions = _m(obj.get("status")).get("conditions") or []
    return any(_m(c).get("type") == kind and _m(c).get("status") == "True" for c in conditions)


def _aw_info(info: PodSetInfo) -> Obj:
    """An ``AppWrapperPodSetInfo``: what the AppWrapper controller adds to the component's pods."""
    out: Obj = {}
    for key, value in (
        ("annotations", info.annotations),
        ("labels", info.labels),
        ("nodeSelector", info.node_selector),
        ("tolerations", info.tolerations),
        ("schedulingGates", info.scheduling_gates),
    ):
        if value:
            out[key] = copy.deepcopy(value)
    return out
