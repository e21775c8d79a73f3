"""The Kubeflow Trainer v2 ``trainer.kubeflow.org/v1alpha1`` TrainJob integration (Kueue's
``pkg/controller/jobs/trainjob``).

A TrainJob holds no pod templates of its own: the Trainer builds a JobSet, named after the
TrainJob, from the runtime it references (``spec.runtimeRef``: a ClusterTrainingRuntime by
default, or a TrainingRuntime of its namespace), with the TrainJob's trainer settings
(``numNodes`` as the ``node`` job's parallelism and completions, ``image``, ``command``,
``args``, ``resourcesPerNode`` for the ``node`` container) and its ``spec.runtimePatches``.
Its Workload is that JobSet's: one pod set per replicated job. kadmit reads the runtime from its
cache, so every method stays pure given the lookup the manager binds.

Starting writes the admitted pod-set info into the runtime patch whose manager is
``kueue.x-k8s.io/manager`` (the webhook adds it on create) and clears ``spec.suspend``; stopping
suspends and empties that patch's replicated jobs, so the runtime is exactly as before.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

from kadmit.controller.jobs.integration import Finished, JobIntegration
from kadmit.controller.jobs.jobset_integration import JobSetIntegration
from kadmit.controller.jobs.podtemplate import PodSetInfo, merge_into_template
from kadmit.kube import Obj, Resource
from kadmit.kube.resources import CLUSTER_TRAINING_RUNTIMES, TRAIN_JOBS, TRAINING_RUNTIMES
from kadmit.webhook.objects import mapping as _m
from kadmit.webhook.trainjob import kueue_runtime_patch
from kadmit.workload import KUEUE_MANAGER

GROUP = "trainer.kubeflow.org"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_NODE = "node"  # the trainer's replicated job and container
#: (resource, namespace or None, name) -> the cached object, or None
Lookup = Callable[[Resource, str | None, str], Obj | None]


class RuntimeNotFound(ValueError):
    """The TrainJob's runtime does not exist (yet): no pod sets until it does."""


def runtime_ref(trainjob: Obj) -> tuple[Resource, str]:
    ref = _m(_m(trainjob.get("spec")).get("runtimeRef"))
    kind = ref.get("kind") or "ClusterTrainingRuntime"
    resource = TRAINING_RUNTIMES if kind == "TrainingRuntime" else CLUSTER_TRAINING_RUNTIMES
    return resource, str(ref.get("name") or "")


def _is_trainer(replicated_job: Obj) -> bool:
    labels = _m(_m(_m(replicated_job.get("template")).get("metadata")).get("labels"))
    return labels.get(ANCESTOR_LABEL) == "trainer" or replicated_job.get("name") == TRAINER_NODE


def _patch_info(patch: Obj) -> PodSetInfo:
    meta = _m(patch.get("metadata"))
    spec = _m(patch.get("spec"))
    return PodSetInfo(
        name="",
        count=0,
        labels=dict(_m(meta.get("labels"))),
        annotations=dict(_m(meta.get("annotations"))),
        node_selector=dict(_m(spec.get("nodeSelector"))),
        tolerations=list(spec.get("tolerations") or []),
        scheduling_gates=list(spec.get("schedulingGates") or []),
    )


def child_jobset(trainjob: Obj, runtime: Obj) -> Obj:
    """The JobSet the Trainer makes for ``trainjob`` from ``runtime`` (its template, the trainer
    settings, the runtime patches' pod-template metadata, nodeSelector, tolerations and gates)."""
    spec = copy.deepcopy(_m(_m(_m(runtime.get("spec")).get("template")).get("spec")))
    trainer = _m(_m(trainjob.get("spec")).get("trainer"))
    num_nodes = trainer.get("numNodes")
    if num_nodes is None:
        num_nodes = _m(_m(runtime.get("spec")).get("mlPolicy")).get("numNodes")
    for rj in spec.get("replicatedJobs") or []:
        if not isinstance(rj, dict) or not _is_trainer(rj):
            continue
        job_spec = rj.setdefault("template", {}).setdefault("spec", {})
        if num_nodes is not None:
            job_spec["parallelism"] = job_spec["completions"] = int(num_nodes)
        for container in job_spec.setdefault("template", {}).setdefault("spec", {}).get("containers") or []:
            if container.get("name") != TRAINER_NODE:
                continue
            for key in ("image", "command", "args"):
                if trainer.get(key) is not None:
                    container[key] = copy.deepcopy(trainer[key])
            if trainer.get("resourcesPerNode") is not None:
                container["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
    by_name = {rj.get("name"): rj for rj in spec.get("replicatedJobs") or [] if isinstance(rj, dict)}
    for patch in _m(trainjob.get("spec")).get("runtimePatches") or []:
        template_patch = _m(_m(_m(patch).get("trainingRuntimeSpec")).get("template"))
        for rj_patch in _m(template_patch.get("spec")).get("replicatedJobs") or []:
            rj = by_name.get(_m(rj_patch).get("name"))
            pod_patch = _m(_m(_m(_m(rj_patch).get("template")).get("spec")).get("template"))
            if rj is None or not pod_patch:
                continue
            job_spec = rj.setdefault("template", {}).setdefault("spec", {})
            job_spec["template"] = merge_into_template(job_spec.get("template") or {}, _patch_info(pod_patch))
    meta = _m(trainjob.get("metadata"))
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
        "spec": spec,
    }


class TrainJobIntegration(JobIntegration):
    framework = "trainer.kubeflow.org/trainjob"
    resource = TRAIN_JOBS
    group = GROUP
    kind = "TrainJob"
    related = (TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES)  # what a TrainJob references

    def __init__(self) -> None:
        self._lookup: Lookup = lambda resource, namespace, name: None

    def bind(self, lookup: Lookup) -> None:
        """Read runtimes through ``lookup`` (the manager's informer caches)."""
        self._lookup = lookup

    def runtime(self, trainjob: Obj) -> Obj:
        resource, name = runtime_ref(trainjob)
        namespace = str(_m(trainjob.get("metadata")).get("namespace") or "") if resource.namespaced else None
        found = self._lookup(resource, namespace, name)
        if found is None:
            raise RuntimeNotFound(f"runtime '{name}' not found")
        return found

    def jobset(self, trainjob: Obj) -> Obj:
        return child_jobset(trainjob, self.runtime(trainjob))

    def templates(self, trainjob: Obj) -> dict[str, Obj]:
        """Copies (the TrainJob has none of its own): the child JobSet's pod templates."""
        return JobSetIntegration().templates(self.jobset(trainjob))

    def pod_sets(self, trainjob: Obj) -> list[Obj]:
        return JobSetIntegration().pod_sets(self.jobset(trainjob))

    def is_active(self, trainjob: Obj) -> bool:
        return any(int(s.get("active") or 0) > 0 for s in _m(trainjob.get("status")).get("jobsStatus") or [])

    def finished(self, trainjob: Obj) -> Finished | None:
        conditions = {c.get("type"): c for c in _m(trainjob.get("status")).get("conditions") or []}
        for kind, reason in (("Complete", "Succeeded"), ("Failed", "Failed")):
            found = conditions.get(kind)
            if found is not None and found.get("status") == "True":
                return Finished(reason, str(found.get("message") or ""))
        return None

    def pods_ready(self, trainjob: Obj) -> bool:
        try:
            jobset = self.jobset(trainjob)
        except RuntimeNotFound:
            return False
        replicas = sum(int(rj.get("replicas", 1)) for rj in jobset["spec"].get("replicatedJobs") or [])
        statuses = _m(trainjob.get("status")).get("jobsStatus") or []
        ready = sum(int(s.get("ready") or 0) + int(s.get("succeeded") or 0) for s in statuses)
        return replicas == ready

    def reclaimable_pods(self, trainjob: Obj) -> list[Obj]:
        statuses = {s.get("name"): s for s in _m(trainjob.get("status")).get("jobsStatus") or []}
        if not statuses:
            return []
        result = []
        for rj in self.jobset(trainjob)["spec"].get("replicatedJobs") or []:
            succeeded = int((statuses.get(rj.get("name")) or {}).get("succeeded") or 0)
            replicas = int(rj.get("replicas", 1))
            if 0 < succeeded <= replicas:
                job_spec = _m(_m(rj.get("template")).get("spec"))
                parallelism = int(job_spec.get("parallelism", 1))
                completions = job_spec.get("completions")
                per_replica = parallelism if completions is None else min(parallelism, int(completions))
                result.append({"name": rj["name"], "count": succeeded * per_replica})
        return result

    def run_with_pod_set_infos(self, trainjob: Obj, infos: Sequence[PodSetInfo]) -> Obj:
        """Kueue's ``RunWithPodSetsInfo``: the admitted info as the Kueue runtime patch's
        replicated jobs, then unsuspended."""
        names = {rj.get("name") for rj in self.jobset(trainjob)["spec"].get("replicatedJobs") or []}
        result = copy.deepcopy(trainjob)
        replicated = []
        for info in infos:
            if info.name not in names:
                raise ValueError(f"admitted pod set {info.name!r} is not in the TrainJob's runtime")
            metadata = {k: v for k, v in (("labels", info.labels), ("annotations", info.annotations)) if v}
            spec = {
                k: v
                for k, v in (
                    ("nodeSelector", info.node_selector),
                    ("tolerations", info.tolerations),
                    ("schedulingGates", info.scheduling_gates),
                )
                if v
            }
            pod: Obj = {}
            if metadata:
                pod["metadata"] = copy.deepcopy(metadata)
            if spec:
                pod["spec"] = copy.deepcopy(spec)
            replicated.append({"name": info.name, "template": {"spec": {"template": pod}}})
        self._kueue_patch(result)["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] = replicated
        self._set_suspend(result, False)
        return result

    def restored(self, trainjob: Obj, pod_sets: Sequence[Obj]) -> Obj:
        """Kueue's ``RestorePodSetsInfo``: the Kueue runtime patch emptied, suspended."""
        result = copy.deepcopy(trainjob)
        self._kueue_patch(result)["trainingRuntimeSpec"]["template"]["spec"].pop("replicatedJobs", None)
        self._stopped(result)
        return result

    def _kueue_patch(self, trainjob: Obj) -> Obj:
        """Kueue's runtime patch in ``trainjob`` (made if missing), with its template spec present."""
        patches = trainjob.setdefault("spec", {}).setdefault("runtimePatches", [])
        found: Obj | None = next(
            (p for p in patches if isinstance(p, dict) and p.get("manager") == KUEUE_MANAGER), None
        )
        if found is None:
            found = kueue_runtime_patch()
            patches.append(found)
        found.setdefault("trainingRuntimeSpec", {}).setdefault("template", {}).setdefault("spec", {})
        return found
