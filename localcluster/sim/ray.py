"""The KubeRay operator (``ray.io/v1``): RayClusters run head and worker Pods, RayJobs run a
RayCluster and a submitter.

Upstream KubeRay's contract, the parts a queueing controller depends on.

RayCluster: one head Pod ``<cluster>-head-<5 chars>`` from ``headGroupSpec.template`` and, per
worker group, ``replicas`` times ``numOfHosts`` worker Pods ``<cluster>-<group>-worker-<5 chars>``
from its template, every Pod labelled ``ray.io/cluster``, ``ray.io/node-type`` (``head`` or
``worker``), ``ray.io/group`` (``headgroup`` or the group's name), ``ray.io/identifier`` and
``ray.io/is-ray-node``, and owned by the RayCluster; a Pod that ended is replaced. Ray's Pods keep
running (``restartPolicy`` Always, the Pod default), so a cluster serves until suspended or
deleted. ``spec.suspend`` deletes every Pod, then reports ``state: suspended`` and the
``RayClusterSuspended`` condition; resuming creates them again from the current templates (that is
how flavors injected on admission reach the Pods). Status: ``state`` (``ready`` once the head and
every worker run and are ready), ``readyWorkerReplicas``, ``availableWorkerReplicas``,
``desiredWorkerReplicas``, ``minWorkerReplicas``, ``maxWorkerReplicas``, ``head.podName`` and
``podIP``, and the ``HeadPodReady`` and ``RayClusterProvisioned`` conditions.

RayJob: ``jobDeploymentStatus`` goes ``Initializing`` (a RayCluster ``<rayjob>-<5 chars>`` from
``rayClusterSpec``, with the RayJob's labels and annotations, owned by it), then ``Running`` once
the cluster is ready (in ``K8sJobMode``, the default, a submitter Job named after the RayJob from
``submitterPodTemplate`` or KubeRay's default template), then ``Complete`` with ``jobStatus:
SUCCEEDED`` when the submitter Job completes, or ``Failed``/``FAILED`` when it fails. In
``HTTPMode`` and ``SidecarMode`` the Ray job itself runs for the RayJob's run time. The run time and
exit code are the local cluster's: the annotations ``localcluster.kadmit.dev/runtime`` and
``localcluster.kadmit.dev/exit-code`` on the RayJob are copied to the submitter Pod, whose kubelet
honours them (or, without a submitter, timed here). ``spec.suspend`` on an Initializing or Running
RayJob goes ``Suspending``: the RayCluster and the submitter Job are deleted, the status reset, then
``Suspended``; resuming starts again from ``New``. When it ends with ``shutdownAfterJobFinishes``
the RayCluster is deleted after ``ttlSecondsAfterFinished``. ``InteractiveMode`` waits for
``spec.jobId`` (``Waiting``) and then runs like ``HTTPMode``.

Both kinds are left alone when ``spec.managedBy`` names another controller (MultiKueue's). The CRDs
are third-party APIs: each controller serves its kind only while its CRD is established.
"""

from __future__ import annotations

import asyncio
import copy

from .. import timestamps
from ..conditions import is_true
from ..errors import ApiError
from ..objects import Obj
from ..objects import meta as _meta
from .apps import is_active, is_ready
from .client import JOBS, PODS, Resource, key_of
from .duration import DurationError, parse_duration
from .informer import Informer
from .jobs import controller_of
from .jobstatus import is_finished
from .kubelet import EXIT_CODE_ANNOTATION, RUNTIME_ANNOTATION
from .thirdparty import CrdGatedController, set_status_condition

Key = tuple[str, str]
GROUP = "ray.io"
RAY_CLUSTERS = Resource(GROUP, "v1", "rayclusters")
RAY_JOBS = Resource(GROUP, "v1", "rayjobs")
KUBERAY_CONTROLLER = "ray.io/kuberay-operator"
CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
IDENTIFIER_LABEL = "ray.io/identifier"
IS_RAY_NODE_LABEL = "ray.io/is-ray-node"
ORIGIN_NAME_LABEL = "ray.io/originated-from-cr-name"
ORIGIN_CRD_LABEL = "ray.io/originated-from-crd"
SUBMISSION_MODE_LABEL = "ray.io/job-submission-mode"
HEAD_GROUP = "headgroup"
SUBMITTER_CONTAINER = "ray-job-submitter"
SUBMITTER_RESOURCES: Obj = {
    "limits": {"cpu": "1", "memory": "1Gi"},
    "requests": {"cpu": "500m", "memory": "200Mi"},
}
DEFAULT_RAY_RUNTIME = 1.0  # seconds a Ray job runs without a submitter and without a run-time annotation


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def foreign(obj: Obj) -> bool:
    """Managed by another controller than KubeRay (``spec.managedBy``): not ours to run."""
    return _spec(obj).get("managedBy") not in (None, "", KUBERAY_CONTROLLER)


def owner_reference(owner: Obj, kind: str) -> Obj:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": kind,
        "name": _meta(owner)["name"],
        "uid": _meta(owner)["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def worker_replicas(group: Obj) -> int:
    """Pods of a worker group: ``replicas`` (1 when unset) times ``numOfHosts``."""
    replicas = group.get("replicas")
    hosts = group.get("numOfHosts")
    return (1 if replicas is None else int(replicas)) * (1 if hosts is None else max(int(hosts), 1))


def ray_pod(cluster: Obj, group: Obj | None, suffix: str) -> Obj:
    """The head Pod (``group`` None) or a worker Pod of ``group``, as KubeRay names and labels it."""
    name = str(_meta(cluster)["name"])
    if group is None:
        source = (_spec(cluster).get("headGroupSpec") or {}).get("template") or {}
        pod_name, node_type, group_name = f"{name[:50]}-head-{suffix}", "head", HEAD_GROUP
    else:
        source = group.get("template") or {}
        group_name = str(group.get("groupName", ""))
        pod_name, node_type = f"{f'{name}-{group_name}'[:50]}-worker-{suffix}", "worker"
    template = copy.deepcopy(source)
    pod_meta = template.get("metadata") or {}
    labels = {
        **(pod_meta.get("labels") or {}),
        CLUSTER_LABEL: name,
        NODE_TYPE_LABEL: node_type,
        GROUP_LABEL: group_name,
        IDENTIFIER_LABEL: f"{name}-{node_type}",
        IS_RAY_NODE_LABEL: "yes",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name.lower(),
            "namespace": _meta(cluster).get("namespace"),
            "labels": labels,
            "annotations": dict(pod_meta.get("annotations") or {}),
            "ownerReferences": [owner_reference(cluster, "RayCluster")],
        },
        "spec": template.get("spec") or {},
    }


class RayClusterController(CrdGatedController):
    name = "raycluster-controller"
    crds = (f"rayclusters.{GROUP}",)

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(seed)
        self._creating: dict[str, dict[str, Obj]] = {}  # cluster uid -> pod name -> created, not yet seen

    def serve(self) -> list[Informer]:
        clusters = self.watch(RAY_CLUSTERS, self.enqueue)
        owned = self.owned_by("RayCluster")

        def on_pod(event: str, pod: Obj, old: Obj | None) -> None:
            owner = controller_of(pod) or {}
            self._creating.get(str(owner.get("uid", "")), {}).pop(str(_meta(pod).get("name", "")), None)
            owned(event, pod, old)

        return [clusters, self.watch(PODS, on_pod, f"{IS_RAY_NODE_LABEL}=yes")]

    def _pods_of(self, uid: str) -> list[Obj]:
        pods = self.informer(PODS)
        seen = [p for p in pods.cache.values() if (controller_of(p) or {}).get("uid") == uid] if pods else []
        names = {_meta(p).get("name") for p in seen}
        return seen + [p for n, p in self._creating.get(uid, {}).items() if n not in names]

    async def reconcile(self, key: Key) -> None:
        if not self.serving or self.primary is None:
            return
        cluster = self.primary.get(*key)
        if cluster is None:
            return
        uid = str(_meta(cluster)["uid"])
        if _meta(cluster).get("deletionTimestamp"):
            self._creating.pop(uid, None)
            return  # the garbage collector removes the Pods with their owner
        if foreign(cluster):
            return
        spec = _spec(cluster)
        pods = [p for p in self._pods_of(uid) if not _meta(p).get("deletionTimestamp")]
        status = copy.deepcopy(cluster.get("status") or {})
        groups = list(spec.get("workerGroupSpecs") or [])
        desired = sum(worker_replicas(g) for g in groups)
        status.update(
            desiredWorkerReplicas=desired,
            minWorkerReplicas=sum(
                int(g.get("minReplicas") or 0) * max(int(g.get("numOfHosts") or 1), 1) for g in groups
            ),
            maxWorkerReplicas=sum(
                int(g.get("maxReplicas") or 0) * max(int(g.get("numOfHosts") or 1), 1) for g in groups
            ),
            observedGeneration=_meta(cluster).get("generation", 1),
        )
        if spec.get("suspend"):
            for pod in pods:
                await self.delete(PODS, pod)
            self._creating.pop(uid, None)
            if not pods:
                status.update(state="suspended", readyWorkerReplicas=0, availableWorkerReplicas=0)
                status.pop("head", None)
                set_status_condition(
                    status, "RayClusterSuspending", False, "RayClusterSuspending", "all Pods are deleted"
                )
                set_status_condition(
                    status, "RayClusterSuspended", True, "RayClusterSuspended", "the RayCluster is suspended"
                )
                set_status_condition(status, "HeadPodReady", False, "HeadPodNotFound", "head Pod not found")
            else:
                set_status_condition(
                    status, "RayClusterSuspending", True, "RayClusterSuspending", "deleting the Pods"
                )
            await self.write_status(RAY_CLUSTERS, cluster, status)
            return

        for pod in pods:
            if not is_active(pod):  # ended: KubeRay replaces it
                await self.delete(PODS, pod)
        running = [p for p in pods if is_active(p)]
        heads = [p for p in running if (_meta(p).get("labels") or {}).get(NODE_TYPE_LABEL) == "head"]
        if not heads:
            await self._create(cluster, ray_pod(cluster, None, self.suffix()))
        ready_workers = 0
        for group in groups:
            name = str(group.get("groupName", ""))
            mine = [
                p
                for p in running
                if (_meta(p).get("labels") or {}).get(NODE_TYPE_LABEL) == "worker"
                and (_meta(p).get("labels") or {}).get(GROUP_LABEL) == name
            ]
            wanted = worker_replicas(group)
            for _ in range(wanted - len(mine)):
                await self._create(cluster, ray_pod(cluster, group, self.suffix()))
            for extra in sorted(mine, key=lambda p: str(_meta(p).get("name")))[wanted:]:
                await self.delete(PODS, extra)
            ready_workers += min(sum(1 for p in mine if is_ready(p)), wanted)

        head_ready = bool(heads) and is_ready(heads[0])
        all_ready = head_ready and ready_workers >= desired
        status.update(readyWorkerReplicas=ready_workers, availableWorkerReplicas=ready_workers)
        if heads:
            pod_status = heads[0].get("status") or {}
            status["head"] = {
                "podName": _meta(heads[0]).get("name"),
                **({"podIP": pod_status["podIP"]} if pod_status.get("podIP") else {}),
            }
        if all_ready:
            status["state"] = "ready"
            if not is_true(status, "RayClusterProvisioned"):
                set_status_condition(
                    status,
                    "RayClusterProvisioned",
                    True,
                    "AllPodRunningAndReadyFirstTime",
                    "All Ray Pods are ready for the first time",
                )
        elif status.get("state") == "suspended":
            status.pop("state")
        set_status_condition(
            status,
            "HeadPodReady",
            head_ready,
            "HeadPodRunningAndReady" if head_ready else "HeadPodNotFound" if not heads else "HeadPodNotReady",
            "the head Pod is running and ready" if head_ready else "the head Pod is not ready",
        )
        if is_true(status, "RayClusterSuspended"):
            set_status_condition(
                status, "RayClusterSuspended", False, "RayClusterSuspended", "the RayCluster is resumed"
            )
        if not is_true(status, "RayClusterProvisioned"):
            set_status_condition(
                status,
                "RayClusterProvisioned",
                False,
                "RayClusterPodsProvisioning",
                "RayCluster Pods are being provisioned for first time",
            )
        await self.write_status(RAY_CLUSTERS, cluster, status)

    async def _create(self, cluster: Obj, pod: Obj) -> None:
        try:
            created = await self.api.create(PODS, _meta(cluster).get("namespace"), pod)
        except ApiError as exc:
            if exc.code != 409:
                self.queue.add_after(key_of(cluster), 0.5)  # refused (a webhook, a quota): again later
            return
        self._creating.setdefault(str(_meta(cluster)["uid"]), {})[str(_meta(created)["name"])] = created


def submitter_job(rayjob: Obj) -> Obj:
    """The submitter Job KubeRay creates in K8sJobMode, named after the RayJob and owned by it."""
    meta, spec = _meta(rayjob), _spec(rayjob)
    template = copy.deepcopy(spec.get("submitterPodTemplate") or {})
    if not template:
        head = ((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {}
        image = str((((head.get("spec") or {}).get("containers") or [{}])[0]).get("image", ""))
        template = {
            "spec": {
                "containers": [
                    {
                        "name": SUBMITTER_CONTAINER,
                        "image": image,
                        "resources": copy.deepcopy(SUBMITTER_RESOURCES),
                    }
                ],
                "restartPolicy": "Never",
            }
        }
    pod_meta = template.setdefault("metadata", {})
    annotations = dict(pod_meta.get("annotations") or {})
    for key in (RUNTIME_ANNOTATION, EXIT_CODE_ANNOTATION):
        value = (meta.get("annotations") or {}).get(key)
        if value is not None:
            annotations.setdefault(key, value)
    if annotations:
        pod_meta["annotations"] = annotations
    template.setdefault("spec", {}).setdefault("restartPolicy", "Never")
    backoff = (spec.get("submitterConfig") or {}).get("backoffLimit")
    labels = {ORIGIN_NAME_LABEL: str(meta["name"]), ORIGIN_CRD_LABEL: "RayJob"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "labels": labels,
            "ownerReferences": [owner_reference(rayjob, "RayJob")],
        },
        "spec": {"backoffLimit": 2 if backoff is None else int(backoff), "template": template},
    }


def cluster_for(rayjob: Obj, name: str) -> Obj:
    """The RayCluster KubeRay makes for a RayJob (``constructRayClusterForRayJob``)."""
    meta, spec = _meta(rayjob), _spec(rayjob)
    labels = {
        **(meta.get("labels") or {}),
        ORIGIN_NAME_LABEL: str(meta["name"]),
        ORIGIN_CRD_LABEL: "RayJob",
        SUBMISSION_MODE_LABEL: str(spec.get("submissionMode") or "K8sJobMode"),
    }
    metadata: Obj = {
        "name": name,
        "namespace": meta.get("namespace"),
        "labels": labels,
        "ownerReferences": [owner_reference(rayjob, "RayJob")],
    }
    if meta.get("annotations"):
        metadata["annotations"] = dict(meta["annotations"])
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "RayCluster",
        "metadata": metadata,
        "spec": copy.deepcopy(spec.get("rayClusterSpec") or {}),
    }


class RayJobController(CrdGatedController):
    name = "rayjob-controller"
    crds = (f"rayjobs.{GROUP}",)

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(seed)
        self._running_since: dict[str, float] = {}  # rayjob uid -> loop time its Ray job started

    def serve(self) -> list[Informer]:
        rayjobs = self.watch(RAY_JOBS, self.enqueue)
        return [
            rayjobs,
            self.watch(RAY_CLUSTERS, self.owned_by("RayJob")),
            self.watch(JOBS, self.owned_by("RayJob"), f"{ORIGIN_CRD_LABEL}=RayJob"),
        ]

    async def reconcile(self, key: Key) -> None:
        rayjob = self.live(key)
        if rayjob is None or foreign(rayjob):
            return
        spec = _spec(rayjob)
        status = copy.deepcopy(rayjob.get("status") or {})
        phase = status.get("jobDeploymentStatus") or ""
        mode = str(spec.get("submissionMode") or "K8sJobMode")
        clusters = self.owned(self.informer(RAY_CLUSTERS), rayjob)
        jobs = self.owned(self.informer(JOBS), rayjob)
        uid = str(_meta(rayjob)["uid"])
        if phase == "":
            status.update(
                jobDeploymentStatus="Initializing",
                jobStatus=status.get("jobStatus") or "",
                rayClusterName=status.get("rayClusterName") or f"{_meta(rayjob)['name']}-{self.suffix()}",
                startTime=timestamps.now(),
            )
            if mode != "InteractiveMode":
                status.setdefault("jobId", f"{_meta(rayjob)['name']}-{self.suffix()}")
        elif phase in ("Initializing", "Running", "Waiting") and spec.get("suspend"):
            status["jobDeploymentStatus"] = "Suspending"
        elif phase == "Initializing":
            cluster = next(
                (c for c in clusters if _meta(c).get("name") == status.get("rayClusterName")), None
            )
            if cluster is None:
                await self._create(RAY_CLUSTERS, rayjob, cluster_for(rayjob, str(status["rayClusterName"])))
            else:
                status["rayClusterStatus"] = copy.deepcopy(cluster.get("status") or {})
                if (cluster.get("status") or {}).get("state") == "ready":
                    if mode == "InteractiveMode":
                        status["jobDeploymentStatus"] = "Waiting"
                    else:
                        if mode == "K8sJobMode" and not jobs:
                            await self._create(JOBS, rayjob, submitter_job(rayjob))
                        status.update(jobDeploymentStatus="Running", jobStatus="RUNNING")
                        self._running_since[uid] = asyncio.get_running_loop().time()
        elif phase == "Waiting":
            if spec.get("jobId"):
                status.update(jobId=spec["jobId"], jobDeploymentStatus="Running", jobStatus="RUNNING")
                self._running_since[uid] = asyncio.get_running_loop().time()
        elif phase == "Running":
            cluster = next(
                (c for c in clusters if _meta(c).get("name") == status.get("rayClusterName")), None
            )
            if cluster is not None:
                status["rayClusterStatus"] = copy.deepcopy(cluster.get("status") or {})
            self._finish_if_done(rayjob, status, mode, jobs)
        elif phase == "Suspending":
            for obj in clusters:
                await self.delete(RAY_CLUSTERS, obj)
            for obj in jobs:
                await self.delete(JOBS, obj)
            if clusters or jobs:
                self.queue.add_after(key, 0.2)  # wait until they are gone (no leak)
                return
            self._running_since.pop(uid, None)
            for field in (
                "rayClusterStatus",
                "rayClusterName",
                "dashboardURL",
                "jobId",
                "message",
                "reason",
                "rayJobInfo",
                "startTime",
                "endTime",
            ):
                status.pop(field, None)
            status.update(jobStatus="", jobDeploymentStatus="Suspended")
        elif phase == "Suspended":
            if not spec.get("suspend"):
                status.update(jobStatus="", jobDeploymentStatus="")
        elif phase in ("Complete", "Failed"):
            self._running_since.pop(uid, None)
            if spec.get("shutdownAfterJobFinishes") and clusters:
                ttl = int(spec.get("ttlSecondsAfterFinished") or 0)
                ended = timestamps.parse_time(str(status.get("endTime") or timestamps.now()))
                wait = ended.timestamp() + ttl - timestamps.parse_time(timestamps.now()).timestamp()
                if wait > 0:
                    self.queue.add_after(key, wait)
                else:
                    for obj in clusters:
                        await self.delete(RAY_CLUSTERS, obj)
        await self.write_status(RAY_JOBS, rayjob, status)

    def _finish_if_done(self, rayjob: Obj, status: Obj, mode: str, jobs: list[Obj]) -> None:
        if mode == "K8sJobMode":
            job = next((j for j in jobs if is_finished(j)), None)
            if job is None:
                return
            succeeded = is_true(job.get("status") or {}, "Complete")
        else:
            annotations = _meta(rayjob).get("annotations") or {}
            try:
                runtime = parse_duration(str(annotations.get(RUNTIME_ANNOTATION, DEFAULT_RAY_RUNTIME)))
            except DurationError:
                runtime = DEFAULT_RAY_RUNTIME
            started = self._running_since.setdefault(
                str(_meta(rayjob)["uid"]), asyncio.get_running_loop().time()
            )
            left = started + runtime - asyncio.get_running_loop().time()
            if left > 0:
                self.queue.add_after(key_of(rayjob), left)
                return
            succeeded = str(annotations.get(EXIT_CODE_ANNOTATION, "0")) == "0"
        status.update(
            jobStatus="SUCCEEDED" if succeeded else "FAILED",
            jobDeploymentStatus="Complete" if succeeded else "Failed",
            endTime=timestamps.now(),
            message="Job finished successfully." if succeeded else "Job failed.",
        )
        if not succeeded:
            status["reason"] = "AppFailed"

    async def _create(self, resource: Resource, rayjob: Obj, obj: Obj) -> None:
        try:
            await self.api.create(resource, _meta(rayjob).get("namespace"), obj)
        except ApiError as exc:
            if exc.code != 409:
                self.queue.add_after(key_of(rayjob), 0.5)
