"""The Job controller: Pods for Jobs that are not suspended, and their status.

Decisions come from :func:`.jobstatus.plan`; this module carries them out over the API. Like
the real controller it remembers the Pods it just created or deleted until their events
arrive ("expectations"), so a reconcile that runs before the watch catches up neither
doubles nor forgets Pods. A Pod the server refuses (a ResourceQuota, a webhook) is retried
with a growing delay, as the real controller's rate-limited queue does.
"""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime

from ..errors import ApiError
from ..objects import Obj
from .client import JOBS, PODS, key_of
from .controller import Controller
from .jobstatus import COMPLETION_INDEX, is_managed_by_job_controller, plan

Key = tuple[str, str]
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
CONTROLLER_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
CREATE_BACKOFF_MIN = 0.2
CREATE_BACKOFF_MAX = 10.0
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # as Kubernetes' rand.String


def controller_of(obj: Obj) -> Obj | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), None)


def _version(obj: Obj) -> int:
    version = str((obj.get("metadata") or {}).get("resourceVersion") or "0")
    return int(version) if version.isdigit() else 0


def _suffix(rng: random.Random) -> str:
    return "".join(rng.choice(_SUFFIX_ALPHABET) for _ in range(5))


def pod_for(job: Obj, index: int | None, rng: random.Random) -> Obj:
    """A Pod from the Job's template, labelled, owned and (in Indexed mode) numbered as the real one."""
    metadata = job["metadata"]
    name, uid = metadata["name"], metadata["uid"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    pod_meta = template.get("metadata") or {}
    labels = dict(pod_meta.get("labels") or {})
    annotations = dict(pod_meta.get("annotations") or {})
    for label in JOB_NAME_LABELS:
        labels[label] = name
    for label in CONTROLLER_UID_LABELS:
        labels[label] = uid
    spec = template.get("spec") or {}
    prefix = name[:50] if index is None else f"{name[:44]}-{index}"
    if index is not None:
        annotations[COMPLETION_INDEX] = str(index)
        labels[COMPLETION_INDEX_LABEL] = str(index)
        spec.setdefault("hostname", f"{name}-{index}"[:63])
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            env = [e for e in container.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
            env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}})
            container["env"] = env
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{prefix}-{_suffix(rng)}",
            "namespace": metadata.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
                "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": spec,
    }


class JobController(Controller[Key]):
    name = "job-controller"
    workers = 4

    def __init__(self, seed: int | None = None) -> None:
        super().__init__()
        self._rng = random.Random(seed)
        self._pods_by_job: dict[str, dict[str, Obj]] = {}  # job uid -> pod name -> pod
        self._creating: dict[str, dict[str, Obj]] = {}  # job uid -> pod name -> created, not yet seen
        self._deleting: dict[str, set[str]] = {}  # job uid -> names deleted, not yet gone
        self._backoff: dict[Key, float] = {}
        self._status_written: dict[Key, int] = {}  # resourceVersion of the last status write, until seen
        self.created = 0
        self.rejected = 0

    async def setup(self) -> None:
        self.jobs = self.watch(JOBS, self._on_job)
        self.pods = self.watch(PODS, self._on_pod)

    def _on_job(self, kind: str, job: Obj, old: Obj | None) -> None:
        self.queue.add(key_of(job))

    def _on_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        owner = controller_of(pod)
        if owner is None or owner.get("kind") != "Job":
            return
        uid = str(owner.get("uid", ""))
        name = str((pod.get("metadata") or {}).get("name", ""))
        if kind == "DELETED":
            self._pods_by_job.get(uid, {}).pop(name, None)
            self._deleting.get(uid, set()).discard(name)
        else:
            self._pods_by_job.setdefault(uid, {})[name] = pod
        self._creating.get(uid, {}).pop(name, None)
        self.queue.add((str((pod.get("metadata") or {}).get("namespace", "")), str(owner.get("name", ""))))

    def owned_pods(self, job_uid: str) -> list[Obj]:
        """The Job's Pods as the controller believes them: observed, plus created, minus deleted."""
        observed = self._pods_by_job.get(job_uid, {})
        deleting = self._deleting.get(job_uid, set())
        pods = [p for name, p in observed.items() if name not in deleting]
        pods.extend(p for name, p in self._creating.get(job_uid, {}).items() if name not in observed)
        return pods

    def _behind_own_write(self, key: Key, job: Obj) -> bool:
        """The cache has not yet seen this controller's last status write of the Job: a write from
        it would only be refused (409); that write's own event brings the Job back here."""
        written = self._status_written.get(key)
        if written is None:
            return False
        if _version(job) >= written:
            del self._status_written[key]
            return False
        return True

    async def reconcile(self, key: Key) -> None:
        job = self.jobs.get(*key)
        if job is None:
            self._status_written.pop(key, None)
            await self._orphaned(key)
            return
        if not is_managed_by_job_controller(job):
            return
        uid = str(job["metadata"].get("uid", ""))
        decision = plan(job, self.owned_pods(uid), datetime.now(UTC))
        for pod in decision.delete:
            await self._delete_pod(uid, pod)
        blocked = False
        for index in decision.create:
            if not await self._create_pod(key, job, index):
                blocked = True
                break
        if decision.create and not blocked:
            self._backoff.pop(key, None)
        if decision.create:
            # Created Pods count as active from now on; recompute so status says so at once.
            decision = plan(job, self.owned_pods(uid), datetime.now(UTC))
        if decision.status != (job.get("status") or {}) and not self._behind_own_write(key, job):
            try:
                written = await self.api.replace(JOBS, {**job, "status": decision.status}, "status")
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise
            else:
                self._status_written[key] = _version(written)
        if decision.recheck_after is not None:
            self.queue.add_after(key, decision.recheck_after)

    async def _create_pod(self, key: Key, job: Obj, index: int | None) -> bool:
        uid = str(job["metadata"].get("uid", ""))
        pod = pod_for(job, index, self._rng)
        try:
            created = await self.api.create(PODS, key[0], pod)
        except ApiError as exc:
            if exc.code == 409:  # a name collision: the next pass picks another suffix
                self.queue.add(key)
                return False
            # Refused (quota, admission, validation): try again later, backing off.
            self.rejected += 1
            delay = min(self._backoff.get(key, CREATE_BACKOFF_MIN / 2) * 2, CREATE_BACKOFF_MAX)
            self._backoff[key] = delay
            self.queue.add_after(key, delay)
            return False
        self.created += 1
        name = str(created.get("metadata", {}).get("name", pod["metadata"]["name"]))
        if name not in self._pods_by_job.get(uid, {}):
            self._creating.setdefault(uid, {})[name] = created
        return True

    async def _delete_pod(self, job_uid: str, pod: Obj) -> None:
        namespace, name = key_of(pod)
        if name in self._creating.get(job_uid, {}) and name not in self._pods_by_job.get(job_uid, {}):
            self._creating[job_uid].pop(name, None)
        self._deleting.setdefault(job_uid, set()).add(name)
        try:
            await self.api.delete(PODS, namespace, name)
        except Exception as exc:  # an error answer, or none at all (a cut connection): not deleted
            if not isinstance(exc, ApiError) or exc.code != 404:
                self._deleting[job_uid].discard(name)
                raise
            self._deleting[job_uid].discard(name)
            self._pods_by_job.get(job_uid, {}).pop(name, None)

    async def _orphaned(self, key: Key) -> None:
        """A deleted Job's running Pods go too, as the garbage collector would remove them."""
        for uid, pods in list(self._pods_by_job.items()):
            for pod in list(pods.values()):
                owner = controller_of(pod) or {}
                if owner.get("name") != key[1] or key_of(pod)[0] != key[0]:
                    continue
                if self.jobs.get(*key) is None and (pod.get("status") or {}).get("phase") not in (
                    "Succeeded", "Failed"
                ) and not (pod.get("metadata") or {}).get("deletionTimestamp"):
                    await self._delete_pod(uid, pod)
        self._backoff.pop(key, None)
