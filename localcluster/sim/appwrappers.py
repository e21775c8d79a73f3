"""The AppWrapper controller (``workload.codeflare.dev/v1beta2``): an AppWrapper's components,
created on resume and deleted on suspend.

Upstream's contract, the parts a queueing controller depends on. On the first pass the controller
records every component's pod sets in ``status.componentStatus`` (declared ``podSets``, else what
it infers for the kinds it knows: a Job, a JobSet, a RayCluster or RayJob, a PyTorchJob, a Pod, a
Deployment, a StatefulSet). A suspended AppWrapper is in phase ``Suspended``. Resumed, it is
``Resuming`` (``QuotaReserved`` true): each component is created in the AppWrapper's namespace,
owned by it and labelled ``workload.codeflare.dev/appwrapper: <name>``, with the same label and the
component's ``podSetInfos`` (labels, annotations, nodeSelector, tolerations, scheduling gates)
added to each of its pod templates; then ``Running`` (``ResourcesDeployed`` true, ``PodsReady``
while every expected pod runs or has succeeded). When all expected pods have succeeded it is
``Succeeded``; when one fails it is ``Failed`` and its components are deleted (``ResourcesDeployed``
false once they are gone). Suspended while running, it is ``Suspending`` until its components and
their pods are gone, then ``Suspended`` with ``QuotaReserved`` false. ``spec.managedBy`` naming
another controller (MultiKueue's) leaves it alone. The CRD is a third-party API: the controller
serves AppWrappers once it is established.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from ..errors import ApiError
from ..objects import Obj
from ..objects import meta as _meta
from .apps import is_active, is_ready
from .client import PODS, Resource
from .informer import Informer
from .thirdparty import CrdGatedController, set_status_condition

Key = tuple[str, str]
GROUP = "workload.codeflare.dev"
APPWRAPPERS = Resource(GROUP, "v1beta2", "appwrappers")
APPWRAPPER_CONTROLLER = "workload.codeflare.dev/appwrapper-controller"
APPWRAPPER_LABEL = "workload.codeflare.dev/appwrapper"
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def at_path(component: Obj, path: str) -> Any:
    """The value at ``path`` (``template.spec.template``, ``...workerGroupSpecs[0].template``), or None."""
    if not path.startswith("template"):
        return None
    cursor: Any = component.get("template")
    rest = path[len("template") :]
    while rest:
        step = _STEP.match(rest)
        if step is None:
            return None
        if step.group(1) is not None:
            cursor = cursor.get(step.group(1)) if isinstance(cursor, dict) else None
        else:
            index = int(step.group(2))
            cursor = cursor[index] if isinstance(cursor, list) and index < len(cursor) else None
        if cursor is None:
            return None
        rest = rest[step.end() :]
    return cursor


def _ray(prefix: str, spec: Obj) -> list[Obj]:
    groups = spec.get("workerGroupSpecs") or []
    return [{"replicas": 1, "path": f"{prefix}headGroupSpec.template"}] + [
        {"replicas": _int(g.get("replicas"), 1), "path": f"{prefix}workerGroupSpecs[{i}].template"}
        for i, g in enumerate(groups)
        if isinstance(g, dict) and isinstance(g.get("template"), dict)
    ]


def inferred_pod_sets(component: Obj) -> list[Obj]:
    """Upstream's ``InferPodSets`` for the kinds it knows."""
    template = component.get("template") or {}
    kind = (template.get("apiVersion"), template.get("kind"))
    spec = template.get("spec") or {}

    def pods(job_spec: Obj) -> int:
        count = _int(job_spec.get("parallelism"), 1)
        completions = job_spec.get("completions")
        return completions if isinstance(completions, int) and completions < count else count

    if kind == ("batch/v1", "Job"):
        return [{"replicas": pods(spec), "path": "template.spec.template"}]
    if kind == ("jobset.x-k8s.io/v1alpha2", "JobSet"):
        return [
            {
                "replicas": _int(rj.get("replicas"), 1) * pods((rj.get("template") or {}).get("spec") or {}),
                "path": f"template.spec.replicatedJobs[{i}].template.spec.template",
            }
            for i, rj in enumerate(spec.get("replicatedJobs") or [])
        ]
    if kind == ("kubeflow.org/v1", "PyTorchJob"):
        specs = spec.get("pytorchReplicaSpecs") or {}
        return [
            {
                "replicas": _int(specs[t].get("replicas"), 1),
                "path": f"template.spec.pytorchReplicaSpecs.{t}.template",
            }
            for t in ("Master", "Worker")
            if isinstance(specs.get(t), dict) and isinstance(specs[t].get("template"), dict)
        ]
    if kind == ("ray.io/v1", "RayCluster"):
        return _ray("template.spec.", spec)
    if kind == ("ray.io/v1", "RayJob"):
        return _ray("template.spec.rayClusterSpec.", spec.get("rayClusterSpec") or {})
    if kind == ("v1", "Pod"):
        return [{"replicas": 1, "path": "template"}]
    if kind in (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")):
        return [{"replicas": _int(spec.get("replicas"), 1), "path": "template.spec.template"}]
    return []


def resource_of(template: Obj) -> Resource:
    """The REST resource of a component (the plural is the kind's lower case plus ``s``, true of
    every kind an AppWrapper wraps in practice: jobs, jobsets, pods, rayclusters, deployments...)."""
    group, _, version = str(template.get("apiVersion", "")).rpartition("/")
    return Resource(group, version, f"{str(template.get('kind', '')).lower()}s")


def component_object(appwrapper: Obj, index: int, pod_sets: list[Obj]) -> Obj:
    """Component ``index`` as the controller creates it: owned, labelled, podSetInfos applied."""
    component = ((appwrapper.get("spec") or {}).get("components") or [])[index]
    obj = copy.deepcopy(component.get("template") or {})
    name = str(_meta(appwrapper)["name"])
    meta = obj.setdefault("metadata", {})
    meta["namespace"] = _meta(appwrapper).get("namespace")
    meta["labels"] = {**(meta.get("labels") or {}), APPWRAPPER_LABEL: name}
    meta["ownerReferences"] = [
        {
            "apiVersion": f"{GROUP}/v1beta2",
            "kind": "AppWrapper",
            "name": name,
            "uid": _meta(appwrapper)["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    infos = component.get("podSetInfos") or []
    holder = {"template": obj}
    for i, pod_set in enumerate(pod_sets):
        template = at_path(holder, str(pod_set.get("path", "")))
        if not isinstance(template, dict):
            continue
        info = infos[i] if i < len(infos) else {}
        pod_meta = template.setdefault("metadata", {})
        pod_meta["labels"] = {
            **(pod_meta.get("labels") or {}),
            **(info.get("labels") or {}),
            APPWRAPPER_LABEL: name,
        }
        if info.get("annotations"):
            pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **info["annotations"]}
        spec = template.setdefault("spec", {})
        if info.get("nodeSelector"):
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **info["nodeSelector"]}
        for key in ("tolerations", "schedulingGates"):
            if info.get(key):
                spec[key] = [
                    *(spec.get(key) or []),
                    *(x for x in info[key] if x not in (spec.get(key) or [])),
                ]
    return obj


class AppWrapperController(CrdGatedController):
    name = "appwrapper-controller"
    crds = (f"appwrappers.{GROUP}",)

    def serve(self) -> list[Informer]:
        wrappers = self.watch(APPWRAPPERS, self.enqueue)

        def on_pod(event: str, pod: Obj, old: Obj | None) -> None:
            owner = (_meta(pod).get("labels") or {}).get(APPWRAPPER_LABEL)
            if owner:
                self.queue.add((str(_meta(pod).get("namespace", "")), owner))

        return [wrappers, self.watch(PODS, on_pod, APPWRAPPER_LABEL)]

    def _pods(self, appwrapper: Obj) -> list[Obj]:
        pods = self.informer(PODS)
        assert pods is not None
        name, namespace = _meta(appwrapper)["name"], _meta(appwrapper).get("namespace")
        return [
            p
            for p in pods.cache.values()
            if (_meta(p).get("labels") or {}).get(APPWRAPPER_LABEL) == name
            and _meta(p).get("namespace") == namespace
        ]

    async def reconcile(self, key: Key) -> None:
        aw = self.live(key)
        if aw is None:
            return
        spec = aw.get("spec") or {}
        if spec.get("managedBy") not in (None, "", APPWRAPPER_CONTROLLER):
            return
        status = copy.deepcopy(aw.get("status") or {})
        components = [c for c in spec.get("components") or [] if isinstance(c, dict)]
        if len(status.get("componentStatus") or []) != len(components):
            status["componentStatus"] = [
                {
                    "name": str(_meta(c.get("template") or {}).get("name", "")),
                    "kind": str((c.get("template") or {}).get("kind", "")),
                    "apiVersion": str((c.get("template") or {}).get("apiVersion", "")),
                    "podSets": list(c.get("podSets") or []) or inferred_pod_sets(c),
                }
                for c in components
            ]
        pod_sets = [list(s.get("podSets") or []) for s in status["componentStatus"]]
        expected = sum(_int(ps.get("replicas"), 1) for sets in pod_sets for ps in sets)
        phase = status.get("phase") or ""
        pods = [p for p in self._pods(aw) if not _meta(p).get("deletionTimestamp")]
        if phase in ("", "Suspended"):
            if spec.get("suspend"):
                status["phase"] = "Suspended"
            else:
                status["phase"] = "Resuming"
                set_status_condition(status, "QuotaReserved", True, "Resuming", "Suspend is false")
        elif phase in ("Resuming", "Running") and spec.get("suspend"):
            status["phase"] = "Suspending"
            set_status_condition(status, "PodsReady", False, "Suspending", "Suspend is true")
        elif phase == "Resuming":
            for index in range(len(components)):
                await self._create(aw, component_object(aw, index, pod_sets[index]))
            status["phase"] = "Running"
            set_status_condition(
                status, "ResourcesDeployed", True, "Resuming", "Resources successfully deployed"
            )
        elif phase == "Running":
            failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
            succeeded = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
            running = [p for p in pods if is_active(p) and is_ready(p)]
            ready = len(running) + len(succeeded) >= expected
            set_status_condition(
                status,
                "PodsReady",
                ready,
                "PodsReady" if ready else "InsufficientPodsReady",
                f"{len(running) + len(succeeded)} pods ready or succeeded of {expected} expected",
            )
            if failed:
                status["phase"] = "Failed"
            elif expected and len(succeeded) >= expected:
                status["phase"] = "Succeeded"
                set_status_condition(
                    status, "QuotaReserved", False, "Succeeded", "The AppWrapper has succeeded"
                )
        elif phase in ("Suspending", "Failed"):
            gone = await self._delete_components(aw, status)
            if gone and not pods:
                set_status_condition(status, "ResourcesDeployed", False, phase, "Resources deleted")
                set_status_condition(status, "PodsReady", False, phase, "No pods")
                if phase == "Suspending":
                    status["phase"] = "Suspended"
                    set_status_condition(status, "QuotaReserved", False, "Suspended", "Suspend is true")
            else:
                self.queue.add_after(key, 0.2)  # wait until they are gone
        await self.write_status(APPWRAPPERS, aw, status)

    async def _create(self, aw: Obj, obj: Obj) -> None:
        try:
            await self.api.create(resource_of(obj), _meta(aw).get("namespace"), obj)
        except ApiError as exc:
            if exc.code != 409:
                raise

    async def _delete_components(self, aw: Obj, status: Obj) -> bool:
        """Delete every component; True when none is left."""
        gone = True
        namespace = str(_meta(aw).get("namespace", ""))
        for component in status.get("componentStatus") or []:
            resource = resource_of(component)
            try:
                current = await self.api.get(resource, namespace, str(component.get("name", "")))
            except ApiError as exc:
                if exc.code == 404:
                    continue
                raise
            gone = False
            await self.delete(resource, current)
        return gone
