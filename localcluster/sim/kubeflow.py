"""The Kubeflow operators: the Training Operator's ``kubeflow.org/v1`` PyTorchJob, TFJob,
XGBoostJob, PaddleJob and JAXJob, and the MPI Operator's ``kubeflow.org/v2beta1`` MPIJob.

Upstream's contract, the parts a queueing controller depends on:

- ``spec.runPolicy.managedBy``: a job managed by another controller (MultiKueue) is left alone;
- ``spec.runPolicy.suspend``: a suspended job has no Pods (they are deleted), and status says
  ``Suspended`` (reason ``<Kind>Suspended``, message ``<Kind> <name> is suspended.``) with
  ``Running`` False; resuming says ``Suspended`` False (``<Kind>Resumed``) and creates the Pods
  again from the templates as they are then (with what kadmit injected);
- one Pod per replica type and index, named ``<job>-<replica type, lower case>-<index>`` (the
  MPIJob launcher ``<job>-launcher``), labelled ``training.kubeflow.org/job-name``,
  ``operator-name`` (``pytorchjob-controller``, ..., ``mpi-operator``), ``replica-type`` (lower
  case), ``replica-index``, and ``job-role: master`` on the Master / Chief / Launcher, owned by
  the job; the Pod's ``restartPolicy`` is the replica spec's (``ExitCode`` → ``Never``; unset:
  the template's, else ``OnFailure``);
- status: ``Created`` on first sight, ``Running`` while Pods run, ``Succeeded`` when the
  leading replica type (Chief, Master or Launcher, else Worker) has all its replicas succeeded,
  ``Failed`` when a Pod of a ``Never`` / ``ExitCode`` replica type failed (``Restarting``, and
  the Pod made again, for ``OnFailure`` / ``Always``); ``replicaStatuses`` per replica type
  (``active``, ``succeeded``, ``failed``, ``selector``), ``startTime``, ``completionTime``;
  ``runPolicy.cleanPodPolicy`` (``None`` by default, ``Running``, ``All``) once finished.

Upstream's MPI Operator wraps the launcher in a batch Job; here the launcher is a Pod of the
MPIJob's own, as the Training Operator's v1 MPIJob made it. The CRDs are third-party APIs: each
kind is served once its CRD is established, so the controller can start before they exist.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass

from .. import timestamps
from ..conditions import find, is_true, set_condition
from ..errors import ApiError
from ..objects import Obj
from ..objects import meta as _meta
from .apps import is_active
from .client import PODS, Resource, key_of
from .controller import Controller
from .informer import Informer
from .jobs import controller_of

GROUP = "kubeflow.org"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
LEADING_TYPES = ("Chief", "Master", "Launcher")  # the replica type whose success is the job's


@dataclass(frozen=True)
class KubeflowKind:
    kind: str
    version: str
    replica_specs_field: str
    replica_types: tuple[str, ...]
    operator_name: str
    managed_by: str

    @property
    def resource(self) -> Resource:
        return Resource(GROUP, self.version, f"{self.kind.lower()}s")

    @property
    def crd(self) -> str:
        return f"{self.kind.lower()}s.{GROUP}"


TRAINING_OPERATOR = "kubeflow.org/training-operator"
KINDS = (
    KubeflowKind(
        "PyTorchJob",
        "v1",
        "pytorchReplicaSpecs",
        ("Master", "Worker"),
        "pytorchjob-controller",
        TRAINING_OPERATOR,
    ),
    KubeflowKind(
        "TFJob",
        "v1",
        "tfReplicaSpecs",
        ("Chief", "Master", "PS", "Worker", "Evaluator"),
        "tfjob-controller",
        TRAINING_OPERATOR,
    ),
    KubeflowKind(
        "XGBoostJob",
        "v1",
        "xgbReplicaSpecs",
        ("Master", "Worker"),
        "xgboostjob-controller",
        TRAINING_OPERATOR,
    ),
    KubeflowKind(
        "PaddleJob",
        "v1",
        "paddleReplicaSpecs",
        ("Master", "Worker"),
        "paddlejob-controller",
        TRAINING_OPERATOR,
    ),
    KubeflowKind("JAXJob", "v1", "jaxReplicaSpecs", ("Worker",), "jaxjob-controller", TRAINING_OPERATOR),
    KubeflowKind(
        "MPIJob",
        "v2beta1",
        "mpiReplicaSpecs",
        ("Launcher", "Worker"),
        "mpi-operator",
        "kubeflow.org/mpi-operator",
    ),
)
BY_KIND = {k.kind: k for k in KINDS}
BY_CRD = {k.crd: k for k in KINDS}

Key = tuple[str, str, str]  # (kind, namespace, name)


def replica_specs(kind: KubeflowKind, job: Obj) -> dict[str, Obj]:
    specs = (job.get("spec") or {}).get(kind.replica_specs_field) or {}
    return {t: specs[t] for t in kind.replica_types if isinstance(specs.get(t), dict)}


def replicas_of(spec: Obj) -> int:
    value = spec.get("replicas")
    return 1 if value is None else int(value)


def pod_name(kind: KubeflowKind, job: str, replica_type: str, index: int) -> str:
    if kind.kind == "MPIJob" and replica_type == "Launcher":
        return f"{job}-launcher"
    return f"{job}-{replica_type.lower()}-{index}"


def run_policy(job: Obj) -> Obj:
    return (job.get("spec") or {}).get("runPolicy") or {}


def replica_pod(kind: KubeflowKind, job: Obj, replica_type: str, index: int) -> Obj:
    """The Pod the operator makes for ``replica_type`` ``index`` from the job's template now."""
    meta = _meta(job)
    spec = replica_specs(kind, job)[replica_type]
    template = copy.deepcopy(spec.get("template") or {})
    template_meta = template.get("metadata") or {}
    labels = {
        **(template_meta.get("labels") or {}),
        JOB_NAME_LABEL: str(meta["name"]),
        OPERATOR_NAME_LABEL: kind.operator_name,
        REPLICA_TYPE_LABEL: replica_type.lower(),
        REPLICA_INDEX_LABEL: str(index),
    }
    if replica_type in LEADING_TYPES:
        labels[JOB_ROLE_LABEL] = "master"
    pod_spec: Obj = template.get("spec") or {}
    restart = spec.get("restartPolicy")
    if restart:
        pod_spec["restartPolicy"] = "Never" if restart == "ExitCode" else restart
    else:
        pod_spec.setdefault("restartPolicy", "OnFailure")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(kind, str(meta["name"]), replica_type, index),
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": dict(template_meta.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{kind.version}",
                    "kind": kind.kind,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": pod_spec,
    }


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_finished(job: Obj) -> bool:
    status = job.get("status") or {}
    return is_true(status, "Succeeded") or is_true(status, "Failed")


class KubeflowController(Controller[Key]):
    """Every Kubeflow kind's operator in one add-on, sharing one Pod informer."""

    name = "kubeflow-operators"
    workers = 2

    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[str, Informer] = {}  # kind -> informer, once its CRD is established
        self.pods: Informer | None = None

    async def setup(self) -> None:
        self.watch_crds(BY_CRD, self._on_crd)

    async def stop(self) -> None:
        await super().stop()
        self.jobs = {}
        self.pods = None

    def _on_crd(self, event: str, crd: Obj, old: Obj | None) -> None:
        kind = BY_CRD.get(key_of(crd)[1])
        if kind is None or kind.kind in self.jobs:
            return
        if event != "DELETED" and is_true(crd.get("status") or {}, "Established"):
            name = kind.kind
            informer = self.watch(kind.resource, lambda e, obj, o: self.queue.add((name, *key_of(obj))))
            self.jobs[name] = informer
            informer.start()
            if self.pods is None:
                self.pods = self.watch(PODS, self._on_pod)
                self.pods.start()
            self.catch_up([informer, self.pods], key=functools.partial(_kind_key, name))

    def _on_pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        owner = controller_of(pod)
        if (
            owner is not None
            and owner.get("kind") in BY_KIND
            and str(owner.get("apiVersion", "")).startswith(GROUP)
        ):
            self.queue.add(
                (str(owner["kind"]), str(_meta(pod).get("namespace", "")), str(owner.get("name", "")))
            )

    async def reconcile(self, key: Key) -> None:
        kind_name, namespace, name = key
        informer = self.jobs.get(kind_name)
        if (
            informer is None
            or self.pods is None
            or not (informer.synced.is_set() and self.pods.synced.is_set())
        ):
            return
        job = informer.get(namespace, name)
        if job is None or _meta(job).get("deletionTimestamp"):
            return
        kind = BY_KIND[kind_name]
        policy = run_policy(job)
        if policy.get("managedBy") not in (None, kind.managed_by):
            return  # another controller's (MultiKueue's): upstream's operator skips it
        uid = _meta(job)["uid"]
        owned = [p for p in self.pods.cache.values() if (controller_of(p) or {}).get("uid") == uid]
        status = copy.deepcopy(job.get("status") or {})
        now = timestamps.now()
        if find(status, "Created") is None:
            set_condition(
                status, "Created", "True", f"{kind_name}Created", f"{kind_name} {name} is created.", now
            )
        specs = replica_specs(kind, job)
        if policy.get("suspend"):
            await self._suspend(kind, job, owned, status, now)
        elif not is_finished(job):
            await self._run(kind, job, specs, owned, status, now)
        else:
            await self._clean(policy, owned)
            status["replicaStatuses"] = self._replica_statuses(kind, job, specs, owned)
        if status != (job.get("status") or {}):
            try:
                await self.api.replace(kind.resource, {**job, "status": status}, "status")
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise

    async def _suspend(self, kind: KubeflowKind, job: Obj, owned: list[Obj], status: Obj, now: str) -> None:
        name = _meta(job)["name"]
        for pod in owned:
            if not _meta(pod).get("deletionTimestamp"):
                await self._delete(pod)
        if is_finished(job):
            return
        if is_true(status, "Running"):
            set_condition(
                status, "Running", "False", f"{kind.kind}Suspended", f"{kind.kind} {name} is suspended.", now
            )
        set_condition(
            status, "Suspended", "True", f"{kind.kind}Suspended", f"{kind.kind} {name} is suspended.", now
        )
        status.pop("startTime", None)
        status["replicaStatuses"] = {
            t: {"selector": self._selector(kind, job, t)} for t in replica_specs(kind, job)
        }

    async def _run(
        self, kind: KubeflowKind, job: Obj, specs: dict[str, Obj], owned: list[Obj], status: Obj, now: str
    ) -> None:
        name = str(_meta(job)["name"])
        if is_true(status, "Suspended"):
            set_condition(
                status, "Suspended", "False", f"{kind.kind}Resumed", f"{kind.kind} {name} is resumed.", now
            )
        status.setdefault("startTime", now)
        by_name = {str(_meta(p)["name"]): p for p in owned}
        failed: dict[str, int] = {}
        for replica_type, spec in specs.items():
            for index in range(replicas_of(spec)):
                pod = by_name.get(pod_name(kind, name, replica_type, index))
                if pod is None:
                    await self._create(kind, job, replica_pod(kind, job, replica_type, index))
                elif _phase(pod) == "Failed" and not _meta(pod).get("deletionTimestamp"):
                    if spec.get("restartPolicy") in ("OnFailure", "Always"):
                        await self._delete(pod)  # made again on the next pass
                        set_condition(
                            status,
                            "Restarting",
                            "True",
                            f"{kind.kind}Restarting",
                            f"{kind.kind} {name} is restarting because 1 {replica_type} replica(s) failed.",
                            now,
                        )
                    else:
                        failed[replica_type] = failed.get(replica_type, 0) + 1
        statuses = self._replica_statuses(kind, job, specs, owned)
        status["replicaStatuses"] = statuses
        leading = next((t for t in LEADING_TYPES if t in specs), "Worker")
        if any(int(s.get("active", 0)) > 0 for s in statuses.values()):
            set_condition(
                status, "Running", "True", f"{kind.kind}Running", f"{kind.kind} {name} is running.", now
            )
        if failed:
            replica_type, count = next(iter(failed.items()))
            message = f"{kind.kind} {name} is failed because {count} {replica_type} replica(s) failed."
            self._finish(kind, status, "Failed", message, now)
        elif leading in specs and statuses[leading].get("succeeded", 0) >= replicas_of(specs[leading]):
            namespace = _meta(job).get("namespace")
            message = f"{kind.kind} {namespace}/{name} successfully completed."
            self._finish(kind, status, "Succeeded", message, now)

    def _finish(self, kind: KubeflowKind, status: Obj, outcome: str, message: str, now: str) -> None:
        if is_true(status, "Running"):
            set_condition(status, "Running", "False", f"{kind.kind}{outcome}", message, now)
        set_condition(status, outcome, "True", f"{kind.kind}{outcome}", message, now)
        status.setdefault("completionTime", now)

    async def _clean(self, policy: Obj, owned: list[Obj]) -> None:
        clean = policy.get("cleanPodPolicy") or "None"
        for pod in owned:
            if _meta(pod).get("deletionTimestamp"):
                continue
            if clean == "All" or (clean == "Running" and is_active(pod)):
                await self._delete(pod)

    def _selector(self, kind: KubeflowKind, job: Obj, replica_type: str) -> str:
        return (
            f"{JOB_NAME_LABEL}={_meta(job)['name']},{OPERATOR_NAME_LABEL}={kind.operator_name},"
            f"{REPLICA_TYPE_LABEL}={replica_type.lower()}"
        )

    def _replica_statuses(self, kind: KubeflowKind, job: Obj, specs: dict[str, Obj], owned: list[Obj]) -> Obj:
        result: Obj = {}
        for replica_type in specs:
            pods = [
                p
                for p in owned
                if (_meta(p).get("labels") or {}).get(REPLICA_TYPE_LABEL) == replica_type.lower()
            ]
            counts = {
                "active": sum(1 for p in pods if is_active(p)),
                "succeeded": sum(1 for p in pods if _phase(p) == "Succeeded"),
                "failed": sum(1 for p in pods if _phase(p) == "Failed"),
            }
            entry: Obj = {k: v for k, v in counts.items() if v}  # omitempty, as upstream's JSON
            entry["selector"] = self._selector(kind, job, replica_type)
            result[replica_type] = entry
        return result

    async def _create(self, kind: KubeflowKind, job: Obj, pod: Obj) -> None:
        try:
            await self.api.create(PODS, _meta(job).get("namespace"), pod)
        except ApiError as exc:
            if exc.code != 409:
                self.queue.add_after((kind.kind, *key_of(job)), 0.5)  # refused (a webhook, a quota): later

    async def _delete(self, pod: Obj) -> None:
        try:
            await self.api.delete(PODS, *key_of(pod))
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise


def _kind_key(kind: str, found: tuple[str, str]) -> tuple[str, str, str]:
    """A job's queue key: its kind too (one controller runs six kinds)."""
    return (kind, *found)
