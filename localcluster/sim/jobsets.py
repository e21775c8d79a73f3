"""The JobSet controller (``jobset.x-k8s.io/v1alpha2``): child Jobs for every replicated job.

Upstream JobSet's contract, the parts a queueing controller depends on: one Job per replicated
job and index, named ``<jobset>-<replicatedJob>-<index>``, labelled and owned by the JobSet;
``spec.suspend`` propagated to the Jobs, and on resume the JobSet's pod-template labels,
annotations, nodeSelector, tolerations and scheduling gates copied into the suspended Jobs (that
is how flavors injected on admission reach the pods); status per replicated job and the
``Completed`` / ``Failed`` / ``Suspended`` conditions, with ``successPolicy`` and
``failurePolicy.maxRestarts``.

The JobSet CRD is a third-party API: the controller watches CustomResourceDefinitions and serves
JobSets only while theirs is established, so it can start before the CRD is installed.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

from .. import timestamps
from ..conditions import find, is_true, set_condition
from ..errors import ApiError
from ..lifecycle import cancel_and_wait
from ..objects import Obj
from .client import JOBS, Resource, delete_options, ignore_stale, key_of
from .controller import Controller
from .informer import Informer
from .jobs import controller_of
from .jobstatus import is_finished

Key = tuple[str, str]
log = logging.getLogger(__name__)

GROUP = "jobset.x-k8s.io"
JOBSETS = Resource(GROUP, "v1alpha2", "jobsets")
JOBSET_CRD = f"jobsets.{GROUP}"
JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
# What a resume copies from the JobSet's pod template into a suspended Job's (upstream resumeJob).
RESUMED_POD_FIELDS = ("nodeSelector", "tolerations", "schedulingGates")


def _true(obj: Obj, kind: str) -> bool:
    return is_true(obj.get("status") or {}, kind)


def replicas(replicated_job: Obj) -> int:
    value = replicated_job.get("replicas")
    return 1 if value is None else int(value)


def child_name(jobset: str, replicated_job: str, index: int) -> str:
    return f"{jobset}-{replicated_job}-{index}"


def child_job(jobset: Obj, replicated_job: Obj, index: int, restarts: int) -> Obj:
    """The Job upstream's ``constructJob`` makes: the template, the JobSet's labels, its owner."""
    meta = jobset["metadata"]
    name = str(meta["name"])
    template = copy.deepcopy(replicated_job.get("template") or {})
    spec: Obj = template.get("spec") or {}
    tags = {
        JOBSET_NAME: name,
        REPLICATED_JOB_NAME: str(replicated_job["name"]),
        REPLICATED_JOB_REPLICAS: str(replicas(replicated_job)),
        JOB_INDEX: str(index),
        RESTART_ATTEMPT: str(restarts),
    }
    job_meta = template.get("metadata") or {}
    pod_template = spec.setdefault("template", {})
    pod_meta = pod_template.setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **tags}
    pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **tags}
    spec["suspend"] = bool((jobset.get("spec") or {}).get("suspend"))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": child_name(name, str(replicated_job["name"]), index),
            "namespace": meta.get("namespace"),
            "labels": {**(job_meta.get("labels") or {}), **tags},
            "annotations": {**(job_meta.get("annotations") or {}), **tags},
            "ownerReferences": [{
                "apiVersion": f"{GROUP}/v1alpha2", "kind": "JobSet", "name": name, "uid": meta["uid"],
                "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": spec,
    }


def resumed_template(job_template: Obj, jobset_template: Obj) -> Obj:
    """The Job's pod template with the JobSet's scheduling directives, as upstream's ``resumeJob``."""
    result = copy.deepcopy(job_template)
    meta = result.setdefault("metadata", {})
    source_meta = jobset_template.get("metadata") or {}
    for field in ("labels", "annotations"):
        merged = {**(meta.get(field) or {}), **(source_meta.get(field) or {})}
        if merged:
            meta[field] = merged
    spec = result.setdefault("spec", {})
    source_spec = jobset_template.get("spec") or {}
    for field in RESUMED_POD_FIELDS:
        if source_spec.get(field):
            spec[field] = copy.deepcopy(source_spec[field])
        else:
            spec.pop(field, None)
    return result


def _set_condition(status: Obj, kind: str, value: bool, reason: str, message: str) -> None:
    """JobSet's conditions are ``metav1.Condition``: no ``lastProbeTime`` (the CRD would prune it,
    and the status would never compare equal), and upstream sets no ``observedGeneration``."""
    set_condition(status, kind, "True" if value else "False", reason, message, timestamps.now())


def replicated_jobs_status(jobset: Obj, children: list[Obj]) -> list[Obj]:
    """Per replicated job, how many of its Jobs are ready, succeeded, failed, active, suspended."""
    out: list[Obj] = []
    for rj in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        mine = [j for j in children
                if (j["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME) == rj["name"]]
        counts = {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
        for job in mine:
            status = job.get("status") or {}
            spec = job.get("spec") or {}
            if _true(job, "Complete"):
                counts["succeeded"] += 1
                continue
            if _true(job, "Failed"):
                counts["failed"] += 1
                continue
            if spec.get("suspend"):
                counts["suspended"] += 1
            if int(status.get("active") or 0) > 0:
                counts["active"] += 1
            parallelism = int(spec.get("parallelism", 1))
            completions = spec.get("completions")
            wanted = parallelism if completions is None else min(parallelism, int(completions))
            if int(status.get("ready") or 0) + int(status.get("succeeded") or 0) >= wanted > 0:
                counts["ready"] += 1
        out.append({"name": rj["name"], **counts})
    return out


def succeeded(jobset: Obj, statuses: list[Obj]) -> bool:
    """``successPolicy``: All (default) or Any of the target replicated jobs' Jobs completed."""
    spec = jobset.get("spec") or {}
    policy = spec.get("successPolicy") or {}
    targets = set(policy.get("targetReplicatedJobs") or [])
    wanted = {rj["name"]: replicas(rj) for rj in spec.get("replicatedJobs") or []
              if not targets or rj["name"] in targets}
    done = {s["name"]: s["succeeded"] for s in statuses if s["name"] in wanted}
    if policy.get("operator") == "Any":
        return any(count > 0 for count in done.values())
    return bool(wanted) and all(done.get(name, 0) >= count for name, count in wanted.items())


class JobSetController(Controller[Key]):
    name = "jobset-controller"
    workers = 2

    def __init__(self) -> None:
        super().__init__()
        self.jobsets: Informer | None = None
        self.jobs: Informer | None = None
        self._children: dict[str, dict[str, Obj]] = {}  # jobset uid -> child Job name -> Job
        self._switch: asyncio.Task[None] | None = None
        self._retired: list[Informer] = []  # informers of a deleted CRD, being stopped

    @property
    def serving(self) -> bool:
        """Whether the JobSet API is served and both caches are synced."""
        return (self.jobsets is not None and self.jobs is not None
                and self.jobsets.synced.is_set() and self.jobs.synced.is_set())

    async def setup(self) -> None:
        self.watch_crds([JOBSET_CRD], self._on_crd)

    async def stop(self) -> None:
        await cancel_and_wait(self._switch)
        for informer in self._retired:
            await informer.stop()
        self._retired.clear()
        await super().stop()
        self.jobsets = self.jobs = None

    # -- the CRD comes and goes ---------------------------------------------------------------------

    def _on_crd(self, kind: str, crd: Obj, old: Obj | None) -> None:
        if key_of(crd)[1] != JOBSET_CRD:
            return
        established = kind != "DELETED" and _true(crd, "Established")
        if established and self.jobsets is None:
            self._start_serving()
        elif not established and self.jobsets is not None:
            self._stop_serving()

    def _start_serving(self) -> None:
        # Reconciles before both caches are synced are skipped; watch_now catches up on them.
        self.jobsets, self.jobs = self.watch_now((JOBSETS, self._on_jobset), (JOBS, self._on_job))

    def _stop_serving(self) -> None:
        informers = [i for i in (self.jobsets, self.jobs) if i is not None]
        self.jobsets = self.jobs = None
        self._children.clear()
        for informer in informers:
            self.informers.remove(informer)
        self._retired.extend(informers)
        self._switch = asyncio.create_task(self._stop_informers(informers))

    async def _stop_informers(self, informers: list[Informer]) -> None:
        for informer in informers:
            await informer.stop()
            self._retired.remove(informer)

    # -- events -------------------------------------------------------------------------------------

    def _on_jobset(self, kind: str, jobset: Obj, old: Obj | None) -> None:
        if kind == "DELETED":
            self._children.pop(str(jobset["metadata"].get("uid", "")), None)
        self.queue.add(key_of(jobset))

    def _on_job(self, kind: str, job: Obj, old: Obj | None) -> None:
        owner = controller_of(job)
        if owner is None or owner.get("kind") != "JobSet" or not str(owner.get("apiVersion", "")).startswith(
            f"{GROUP}/"
        ):
            return
        uid, name = str(owner.get("uid", "")), str(job["metadata"].get("name", ""))
        if kind == "DELETED":
            self._children.get(uid, {}).pop(name, None)
        else:
            self._children.setdefault(uid, {})[name] = job
        self.queue.add((str(job["metadata"].get("namespace", "")), str(owner.get("name", ""))))

    # -- reconcile ----------------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> None:
        if not self.serving or self.jobsets is None:
            return
        jobset = self.jobsets.get(*key)
        if jobset is None or jobset["metadata"].get("deletionTimestamp"):
            return  # the garbage collector removes the child Jobs with their owner
        spec = jobset.get("spec") or {}
        if spec.get("managedBy") not in (None, JOBSET_CONTROLLER):
            return  # MultiKueue's (or another controller's) JobSet
        children = list(self._children.get(str(jobset["metadata"]["uid"]), {}).values())
        status = copy.deepcopy(jobset.get("status") or {})
        restarts = int(status.get("restarts") or 0)
        current = [j for j in children if self._attempt(j) >= restarts]
        stale = [j for j in children if self._attempt(j) < restarts]
        for job in stale:
            await self._delete(job)

        if status.get("terminalState"):
            await self._delete_all(j for j in current if not is_finished(j))
        elif any(_true(j, "Failed") for j in current):
            max_restarts = int((spec.get("failurePolicy") or {}).get("maxRestarts") or 0)
            if restarts < max_restarts:
                status["restarts"] = restarts + 1
                status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax") or 0) + 1
                await self._delete_all(current)
                current = []
            else:
                reason, message = "FailedJobs", "jobset failed due to one or more job failures"
                if spec.get("failurePolicy") is not None:
                    reason = "ReachedMaxRestarts"
                    message = "jobset failed due to reaching max number of restarts"
                _set_condition(status, "Failed", True, reason, message)
                status["terminalState"] = "Failed"
                await self._delete_all(j for j in current if not is_finished(j))
        else:
            statuses = replicated_jobs_status(jobset, current)
            if succeeded(jobset, statuses):
                _set_condition(status, "Completed", True, "AllJobsCompleted", "jobset completed successfully")
                status["terminalState"] = "Completed"
                await self._delete_all(j for j in current if not is_finished(j))
            else:
                current = await self._run(jobset, current, restarts)

        status["replicatedJobsStatus"] = replicated_jobs_status(jobset, current)
        if not status.get("terminalState"):
            if spec.get("suspend"):
                _set_condition(status, "Suspended", True, "SuspendedJobs", "jobset is suspended")
            elif find(status, "Suspended") is not None:
                _set_condition(status, "Suspended", False, "ResumeJobs", "jobset is resumed")
        if status != (jobset.get("status") or {}):
            await ignore_stale(self.api.replace(JOBSETS, {**jobset, "status": status}, "status"))

    @staticmethod
    def _attempt(job: Obj) -> int:
        text = (job["metadata"].get("labels") or {}).get(RESTART_ATTEMPT, "0")
        return int(text) if str(text).isdigit() else 0

    async def _run(self, jobset: Obj, current: list[Obj], restarts: int) -> list[Obj]:
        """Create missing Jobs and bring every unfinished one to the JobSet's suspend state."""
        spec = jobset.get("spec") or {}
        suspend = bool(spec.get("suspend"))
        namespace = str(jobset["metadata"].get("namespace", ""))
        by_name = {str(j["metadata"]["name"]): j for j in current}
        for rj in spec.get("replicatedJobs") or []:
            pod_template = ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
            for index in range(replicas(rj)):
                name = child_name(str(jobset["metadata"]["name"]), str(rj["name"]), index)
                job = by_name.get(name)
                if job is None:
                    try:
                        made = child_job(jobset, rj, index, restarts)
                        created = await self.api.create(JOBS, namespace, made)
                    except ApiError as exc:
                        if exc.code != 409:  # 409: an old attempt's Job is still going away
                            raise
                        continue
                    by_name[name] = created
                    self._children.setdefault(str(jobset["metadata"]["uid"]), {}).setdefault(name, created)
                elif is_finished(job) or bool((job.get("spec") or {}).get("suspend")) == suspend:
                    continue
                elif suspend:
                    patch = {"spec": {"suspend": True}}
                    by_name[name] = await self.api.merge_patch(JOBS, namespace, name, patch)
                else:
                    by_name[name] = await self._resume(job, pod_template)
        return list(by_name.values())

    async def _resume(self, job: Obj, pod_template: Obj) -> Obj:
        """Unsuspend a Job with the JobSet's current scheduling directives (upstream ``resumeJob``).

        A Job's template may change only while it is suspended and has never started, so a Job
        that ran before (and was suspended again) first loses its ``status.startTime``.
        """
        if (job.get("status") or {}).get("startTime"):
            status = dict(job["status"])
            status.pop("startTime")
            job = await self.api.replace(JOBS, {**job, "status": status}, "status")
        job_spec = dict(job.get("spec") or {})
        job_spec["template"] = resumed_template(job_spec.get("template") or {}, pod_template)
        job_spec["suspend"] = False
        return await self.api.replace(JOBS, {**job, "spec": job_spec})

    async def _delete_all(self, jobs: Any) -> None:
        for job in list(jobs):
            await self._delete(job)

    async def _delete(self, job: Obj) -> None:
        if job["metadata"].get("deletionTimestamp"):
            return
        namespace, name = key_of(job)
        uid = str(job["metadata"].get("uid") or "") or None
        options = delete_options(uid=uid, propagation="Background")
        await ignore_stale(self.api.delete(JOBS, namespace, name, options))
