"""The one interface every kind of batch job implements, so the reconciler stays kind-agnostic.

An integration knows where a kind keeps its pod templates and its suspend flag, how many pods
each pod set runs, and when the job is finished, active or ready. Starting and stopping are
written once, here, on top of :meth:`JobIntegration.templates`: inject the admitted pod-set
info and unsuspend; suspend and put the Workload's templates back.

Every method is pure: it takes the job's dict and returns values or a new dict.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kadmit.controller.jobs.podtemplate import PodSetInfo, merge_into_template, restore_template
from kadmit.kube import Obj, Resource, copy_object

STOPPING_ANNOTATION = "kueue.x-k8s.io/stopping"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"


@dataclass(frozen=True)
class Finished:
    """A job's terminal state: Workload ``Finished=True`` with this reason (Succeeded / Failed)."""

    reason: str
    message: str


def finished_by_condition(
    job: Obj, succeeded: tuple[str, str], failed: tuple[str, str]
) -> Finished | None:
    """A job's terminal state from its first true condition of the ``succeeded`` or ``failed``
    type, each given as ``(condition type, message when the condition has none)``."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        for reason, (kind, default) in (("Succeeded", succeeded), ("Failed", failed)):
            if condition.get("type") == kind:
                return Finished(reason, str(condition.get("message") or default))
    return None


class JobIntegration(ABC):
    """A kind of job kadmit manages (Kueue's ``GenericJob``)."""

    framework: str  # the name in Configuration.integrations.frameworks, e.g. "batch/job"
    resource: Resource
    group: str  # API group, "batch"
    kind: str  # "Job"
    #: Where the kind keeps its suspend flag (and managedBy): ``spec`` for a Job, ``spec.runPolicy``
    #: for the Kubeflow jobs.
    run_policy: tuple[str, ...] = ("spec",)
    #: Other kinds whose objects the integration reads (TrainJob: its runtimes); the manager caches
    #: them and hands :meth:`bind` a lookup into those caches.
    related: tuple[Resource, ...] = ()

    def bind(self, lookup: Callable[[Resource, str | None, str], Obj | None]) -> None:
        """Read the :attr:`related` objects through ``lookup(resource, namespace, name)``."""
        return None

    @property
    def api_version(self) -> str:
        return self.resource.api_version

    # -- reading a job

    @abstractmethod
    def templates(self, job: Obj) -> dict[str, Obj]:
        """Pod-set name → the pod template dict inside ``job`` (the same objects, for in-place edits)."""

    @abstractmethod
    def pod_sets(self, job: Obj) -> list[Obj]:
        """The Workload's ``spec.podSets`` for this job (name, count, template, minCount)."""

    def suspend_flag(self, job: Obj) -> bool:
        """The job's suspend field as written (whatever kadmit is doing to it)."""
        holder: Any = job
        for key in self.run_policy:
            holder = holder.get(key) if isinstance(holder, dict) else None
        return isinstance(holder, dict) and bool(holder.get("suspend"))

    def _set_suspend(self, job: Obj, value: bool) -> None:
        holder = job
        for key in self.run_policy:
            if not isinstance(holder.get(key), dict):
                holder[key] = {}
            holder = holder[key]
        holder["suspend"] = value

    def is_suspended(self, job: Obj) -> bool:
        # While kadmit is stopping a job (annotation "stopping"), it does not count as suspended yet.
        annotations = job.get("metadata", {}).get("annotations") or {}
        return self.suspend_flag(job) and annotations.get(STOPPING_ANNOTATION) != "true"

    @abstractmethod
    def is_active(self, job: Obj) -> bool:
        """Whether any of the job's pods still run (a stopped job must reach False before requeue)."""

    @abstractmethod
    def finished(self, job: Obj) -> Finished | None: ...

    @abstractmethod
    def pods_ready(self, job: Obj) -> bool:
        """Whether enough pods are ready or succeeded (WaitForPodsReady's PodsReady condition)."""

    def reclaimable_pods(self, job: Obj) -> list[Obj]:
        """``status.reclaimablePods`` of the Workload: pods that finished and free their quota."""
        return []

    def priority_class(self, job: Obj) -> str | None:
        """The job's PriorityClass when the kind names it somewhere of its own (Kueue's
        ``JobWithPriorityClass``); None: the first pod set's ``priorityClassName``."""
        return None
    def skip(self, job: Obj) -> bool:
        """Whether kadmit leaves this job alone although it is of a managed kind (Kueue's
        ``JobWithSkip``: a RayJob that runs on an existing cluster)."""
        return False

    def queue_name(self, job: Obj) -> str:
        return str((job.get("metadata", {}).get("labels") or {}).get(QUEUE_NAME_LABEL, ""))

    # -- changing a job: pure, returns the new dict to write

    def run_with_pod_set_infos(self, job: Obj, infos: Sequence[PodSetInfo]) -> Obj:
        """The job unsuspended, each template carrying its pod set's admitted info."""
        result = copy_object(job)
        templates = self.templates(result)
        for info in infos:
            if info.name not in templates:
                raise ValueError(f"admitted pod set {info.name!r} is not in the {self.kind}")
            merged = merge_into_template(templates[info.name], info)
            templates[info.name].clear()
            templates[info.name].update(merged)
        self.apply_counts(result, infos)
        self._set_suspend(result, False)
        return result

    def apply_counts(self, job: Obj, infos: Sequence[PodSetInfo]) -> None:
        """Partial admission: set the job's size from the admitted counts (in place). Default: nothing."""
        return None

    def suspended(self, job: Obj) -> Obj:
        """The job with ``spec.suspend=true`` and the stopping annotation (stop, step 1)."""
        result = copy_object(job)
        self._set_suspend(result, True)
        result["metadata"].setdefault("annotations", {})[STOPPING_ANNOTATION] = "true"
        return result

    def restored(self, job: Obj, pod_sets: Sequence[Obj]) -> Obj:
        """The job with its templates back to the Workload's copy and no stopping annotation."""
        result = copy_object(job)
        templates = self.templates(result)
        for pod_set in pod_sets:
            template = templates.get(pod_set.get("name", ""))
            if template is None:
                continue
            restored = restore_template(template, pod_set.get("template") or {})
            template.clear()
            template.update(restored)
        self.restore_counts(result, pod_sets)
        self._stopped(result)
        return result

    def _stopped(self, job: Obj) -> None:
        """Stop, last step (in place): suspended, and no longer carrying the stopping annotation."""
        annotations = job["metadata"].get("annotations") or {}
        annotations.pop(STOPPING_ANNOTATION, None)
        if not annotations:
            job["metadata"].pop("annotations", None)
        self._set_suspend(job, True)

    def restore_counts(self, job: Obj, pod_sets: Sequence[Obj]) -> None:
        """Undo :meth:`apply_counts` (in place). Default: nothing."""
        return None

    def status_after_stop(self, job: Obj) -> Obj | None:
        """A status patch to send between suspending and restoring (Job: clear startTime), or None."""
        return None


def workload_template(template: Obj) -> Obj:
    """A pod template as a Workload keeps it: a copy without the Job controller's own labels."""
    result = copy_object(template)
    labels = (result.get("metadata") or {}).get("labels")
    if labels:
        for key in ("controller-uid", "job-name", "batch.kubernetes.io/controller-uid"):
            labels.pop(key, None)
    return result


class ComposableIntegration(ABC):
    """A kind whose Workload covers several objects (Kueue's ``ComposableJob``): plain Pods, where
    Pods sharing a group name are one Workload, and every kind that rides on pod groups.

    The objects ("members") are gated rather than suspended: each starts when its own pod set's
    info is merged in and its gate removed, and stops by being deleted. A member alone (no group)
    is a Workload of its own. Every method is pure; the group reconciler reads and writes.
    """

    framework: str
    resource: Resource
    group: str
    kind: str
    finalizer: str  # what the webhook puts on each member so that kadmit sees how it ended
    member_label_selector: str | None = None  # the members worth watching, when a label tells them
    implicit = False  # enabled only for the kinds riding on it, not named in integrations.frameworks

    @property
    def api_version(self) -> str:
        return self.resource.api_version

    @abstractmethod
    def group_of(self, member: Obj) -> str | None:
        """The name of the group ``member`` belongs to, or None when it is a Workload of its own."""

    @abstractmethod
    def is_managed(self, member: Obj) -> bool: ...

    @abstractmethod
    def queue_name_of(self, members: Sequence[Obj]) -> str: ...

    @abstractmethod
    def workload_name(self, members: Sequence[Obj], group: str | None) -> str: ...

    @abstractmethod
    def is_serving(self, members: Sequence[Obj], group: str | None) -> bool:
        """A long-running group: never finished by its members' phases, nothing reclaimable."""

    @abstractmethod
    def check_group(self, members: Sequence[Obj]) -> None:
        """Raise ValueError (with Kueue's message) while the group cannot make a Workload yet."""

    @abstractmethod
    def pod_sets(self, members: Sequence[Obj], group: str | None) -> list[Obj]: ...

    @abstractmethod
    def group_size(self, members: Sequence[Obj]) -> int:
        """How many members the group counts (after :meth:`check_group` accepted it)."""

    @abstractmethod
    def is_suspended(self, members: Sequence[Obj]) -> bool: ...

    @abstractmethod
    def is_active(self, members: Sequence[Obj]) -> bool: ...

    @abstractmethod
    def finished(self, members: Sequence[Obj], group: str | None) -> Finished | None: ...

    @abstractmethod
    def pods_ready(self, members: Sequence[Obj], group: str | None) -> bool: ...

    @abstractmethod
    def reclaimable_pods(self, members: Sequence[Obj], group: str | None) -> list[Obj]: ...

    @abstractmethod
    def pod_set_of(self, member: Obj, group: str | None) -> str:
        """The pod set (role) ``member`` runs in."""

    @abstractmethod
    def started(self, member: Obj, info: PodSetInfo) -> Obj | None:
        """``member`` with its pod set's admitted info and no gate, or None when it already runs."""

    @abstractmethod
    def to_stop(self, members: Sequence[Obj], workload_deleted: bool) -> list[Obj]:
        """The members to delete to stop the Workload."""

    @abstractmethod
    def partition(self, members: Sequence[Obj]) -> tuple[list[Obj], list[Obj]]:
        """(members that can still run or have succeeded, the others)."""

    @abstractmethod
    def absent(self, members: Sequence[Obj], count: int, active: int) -> int:
        """How many members a pod set of ``count`` with ``active`` runnable members still waits for."""

    @abstractmethod
    def keep_order(self, member: Obj) -> tuple[Any, ...]:
        """Sort key: the members of a role to keep first when the role has more than it needs."""
