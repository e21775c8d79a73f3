"""MultiKueue adapters by GVK (Kueue's ``jobframework.MultiKueueAdapter``): how each kind of job is
copied to the winning worker, how its status comes back, and whether MultiKueue may dispatch it.

One generic adapter handles any kind that follows Kueue's conventions (``spec.managedBy``,
``spec.suspend``, a ``status`` to copy whole): it is Kueue's external-framework adapter, and every
built-in kind whose Kueue adapter does no more than that (JobSet, the Kubeflow kinds, Ray,
AppWrapper) is one line of :data:`BUILTIN`. The Job keeps its own differences (selector and
job-controller labels dropped, the status sync deferred while the local Job is suspended), the
TrainJob its own (Kueue's runtime patch left out of the copy); Pods are dispatched as a group
and are never refused (they have no ``managedBy``).

Every method is pure: dicts in, dicts out; the check (:mod:`kadmit.checks.multikueue`) does the I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kadmit.checks.multikueue_remote import (
    CONTROLLER_NAME,
    ORIGIN_LABEL,
    job_finished,
    job_suspended,
    local_workload_of,
    remote_job,
    set_multikueue_meta,
    set_prebuilt_workload,
)
from kadmit.kube import Obj, Resource, copy_object
from kadmit.kube.resources import (
    APPWRAPPERS,
    JAX_JOBS,
    JOBS,
    JOBSETS,
    MPI_JOBS,
    PADDLE_JOBS,
    PODS,
    PYTORCH_JOBS,
    RAY_CLUSTERS,
    RAY_JOBS,
    TF_JOBS,
    TRAIN_JOBS,
    XGBOOST_JOBS,
)
from kadmit.workload import KUEUE_MANAGER, format_time, is_elastic, ray_worker_count

POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
SYNC_DEFERRED_REASON = "MultiKueueAdapter"
SYNC_DEFERRED_MESSAGE = "Set by MultiKueue adapter"  # Kueue's words (job_multikueue_adapter.go)


def gvk_string(group: str, version: str, kind: str) -> str:
    """Go's ``schema.GroupVersionKind.String()``: ``batch/v1, Kind=Job`` (core: ``/v1, Kind=Pod``)."""
    return f"{group}/{version}, Kind={kind}"


def gvk_of_reference(api_version: str, kind: str) -> str:
    """The GVK string of an ownerReference (``apiVersion`` + ``kind``), as Kueue keys its adapters."""
    group, _, version = api_version.rpartition("/")
    return gvk_string(group, version, kind)


class MultiKueueAdapter:
    """The generic adapter: any kind with ``spec.managedBy`` and a ``status`` (Kueue's external one)."""

    watch_on_manager = True  # follow the kind's objects on the manager (changes re-evaluate Workloads)

    def __init__(
        self, resource: Resource, framework: str = "", *, managed_by: tuple[str, ...] = ("managedBy",)
    ) -> None:
        """``managed_by``: where the kind keeps its managedBy under ``spec`` (the Kubeflow
        training kinds: ``("runPolicy", "managedBy")``)."""
        if not resource.kind:
            raise ValueError(f"{resource}: an adapter needs the kind")
        self.resource = resource
        self.framework = framework  # integrations.frameworks name; "" for an external framework
        self.managed_by = managed_by

    @property
    def gvk(self) -> str:
        return gvk_string(self.resource.group, self.resource.version, self.resource.kind)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.gvk})"

    # -- may MultiKueue dispatch it

    def managed_problem(self, local: Obj) -> str | None:
        """Why the object is not managed by MultiKueue (Kueue's reason), or None if it is."""
        managed_by = _at(local.get("spec") or {}, self.managed_by)
        if managed_by == CONTROLLER_NAME:
            return None
        return f'Expecting spec.managedBy to be "{CONTROLLER_NAME}" not "{managed_by or ""}"'

    def is_dispatched(self, local: Obj) -> bool:
        """Whether a change of ``local`` on the manager concerns MultiKueue (re-evaluate its Workload)."""
        return self.managed_problem(local) is None

    # -- the objects of one Workload

    def group_selector(self, local: Obj) -> str | None:
        """A label selector for the other local objects the Workload covers with ``local``, or None."""
        return None

    # -- the copy on the worker

    def remote_object(self, local: Obj, workload_name: str, origin: str) -> Obj:
        """The object to create on the winner: metadata for creation, the spec, no ``managedBy``."""
        spec = copy_object(local.get("spec") or {})
        parent = _at(spec, self.managed_by[:-1])
        if isinstance(parent, dict):
            parent.pop(self.managed_by[-1], None)
        return set_multikueue_meta(_for_creation(local, spec), workload_name, origin)

    def status_to_copy(self, local: Obj, remote: Obj) -> Obj | None:
        """The status the local object should have from its remote copy, or None to defer the copy."""
        return copy_object(remote.get("status") or {})

    def deferred_status(self, local: Obj, now: float) -> Obj | None:
        """A status patch saying the copy is deferred (Kueue's Job note), or None."""
        return None

    # -- an elastic job resized on the manager (ElasticJobsViaWorkloadSlices)

    def replicas(self, obj: Obj) -> dict[str, int] | None:
        """The pods of an elastic job by what sizes them (the pod set, the worker group), compared
        between the manager's object and its copy; None: the kind's copy is never resized (Kueue's
        adapter for it has no elastic sync)."""
        return None

    def with_replicas(self, remote: Obj, local: Obj) -> Obj:
        """``remote`` (a copy the caller owns) sized as ``local``; returned."""
        raise NotImplementedError(f"{self}: the kind is not resized")

    def resized(self, local: Obj, remote: Obj, workload_name: str, current_slice: str) -> Obj | None:
        """The copy on the worker resized as the manager's elastic job was (Kueue's
        ``needElasticSync`` and ``syncElastic``, one for every kind that has them): its size, and
        the prebuilt Workload it runs under set to ``workload_name`` (the slice the worker
        admitted). None when nothing is to change: the kind has no elastic sync, the job is not
        elastic, or the job grew and ``workload_name`` is not ``current_slice`` (the name of the
        slice for the job's current size): a stale view during a scale-up, as the new size comes
        to the worker only with the new slice. Only what both sides have is compared."""
        want, have = self.replicas(local), self.replicas(remote)
        if want is None or have is None or not is_elastic(local):
            return None
        want = {name: count for name, count in want.items() if name in have}
        have = {name: have[name] for name in want}
        if sum(have.values()) < sum(want.values()) and workload_name != current_slice:
            return None
        if have == want and local_workload_of(remote) == workload_name:
            return None
        return set_prebuilt_workload(self.with_replicas(copy_object(remote), local), workload_name)


class JobAdapter(MultiKueueAdapter):
    """``batch/v1`` Job: selector and job-controller labels dropped; the status copy deferred while
    the local Job is suspended and its copy runs (a suspended Job may not report a running one)."""

    def remote_object(self, local: Obj, workload_name: str, origin: str) -> Obj:
        return remote_job(local, workload_name, origin)

    def replicas(self, obj: Obj) -> dict[str, int] | None:
        """Kueue's Job adapter resizes ``spec.parallelism``."""
        parallelism = (obj.get("spec") or {}).get("parallelism")
        return {"parallelism": parallelism if isinstance(parallelism, int) else 1}

    def with_replicas(self, remote: Obj, local: Obj) -> Obj:
        spec = remote.setdefault("spec", {})
        spec["parallelism"] = (local.get("spec") or {}).get("parallelism")
        if spec["parallelism"] is None:
            del spec["parallelism"]
        return remote

    def status_to_copy(self, local: Obj, remote: Obj) -> Obj | None:
        # Kueue copies while the local Job runs, when both are suspended, or once the copy finished.
        if job_suspended(local) and not job_suspended(remote) and not job_finished(remote):
            return None
        return copy_object(remote.get("status") or {})

    def deferred_status(self, local: Obj, now: float) -> Obj | None:
        """The local Job is still suspended while its copy runs: say so on it, as Kueue does, once:
        a ``Suspended`` condition already True (whoever set it) is left as it is."""
        conditions = [dict(c) for c in (local.get("status") or {}).get("conditions") or []]
        current = next((c for c in conditions if c.get("type") == "Suspended"), None)
        if current is not None and current.get("status") == "True":
            return None
        when = format_time(now)
        note = {
            "type": "Suspended",
            "status": "True",
            "reason": SYNC_DEFERRED_REASON,
            "message": SYNC_DEFERRED_MESSAGE,
            "lastProbeTime": when,
            "lastTransitionTime": when,
        }
        if current is None:  # Kueue's setJobStatusCondition: in place, or appended
            conditions.append(note)
        else:
            conditions[conditions.index(current)] = note
        return {"conditions": conditions}


class PodAdapter(MultiKueueAdapter):
    """A Pod, or every Pod of its group (``kueue.x-k8s.io/pod-group-name``): Kueue dispatches them
    without asking (a Pod has no ``managedBy``) and copies each Pod's status, keeping the local
    ``PodScheduled`` (SchedulingGated) until the remote Pod is scheduled."""

    watch_on_manager = False  # the Workload's own changes drive the Pods; every Pod costs too much

    def managed_problem(self, local: Obj) -> str | None:
        return None

    def is_dispatched(self, local: Obj) -> bool:
        return False

    def group_selector(self, local: Obj) -> str | None:
        group = ((local.get("metadata") or {}).get("labels") or {}).get(POD_GROUP_LABEL)
        return f"{POD_GROUP_LABEL}={group}" if group else None

    def remote_object(self, local: Obj, workload_name: str, origin: str) -> Obj:
        return set_multikueue_meta(
            _for_creation(local, copy_object(local.get("spec") or {})), workload_name, origin
        )

    def status_to_copy(self, local: Obj, remote: Obj) -> Obj | None:
        if (local.get("metadata") or {}).get("deletionTimestamp"):
            return None
        status = copy_object(remote.get("status") or {})
        local_scheduled = _pod_condition(local, "PodScheduled")
        remote_scheduled = _pod_condition(remote, "PodScheduled")
        gated = bool((local.get("spec") or {}).get("schedulingGates"))
        if gated and local_scheduled is not None and (remote_scheduled or {}).get("status") != "True":
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            status["conditions"] = [*conditions, copy_object(local_scheduled)]
        return status


class RayClusterAdapter(MultiKueueAdapter):
    """``ray.io`` RayCluster (Kueue's ``ray.NewMKAdapter`` with ``WithElasticReplicaSync``): an
    elastic cluster's copy follows the manager's worker groups, ``replicas`` and ``numOfHosts``
    of each group on both (matched by ``groupName``). RayJob has no such sync in Kueue: its
    workers belong to a RayCluster the manager does not have."""

    def replicas(self, obj: Obj) -> dict[str, int] | None:
        """Each worker group's pods (Kueue's ``workerReplicaCounts``)."""
        return {str(group.get("groupName")): ray_worker_count(group) for group in _worker_groups(obj)}

    def with_replicas(self, remote: Obj, local: Obj) -> Obj:
        """Each group's ``replicas`` and ``numOfHosts`` (both make its pods), matched by name."""
        want = {str(group.get("groupName")): group for group in _worker_groups(local)}
        for group in _worker_groups(remote):
            source = want.get(str(group.get("groupName")))
            if source is None:  # a group only the copy has: left alone, as in Kueue
                continue
            for field_name in ("replicas", "numOfHosts"):
                if field_name in source:
                    group[field_name] = source[field_name]
                else:
                    group.pop(field_name, None)
        return remote


def _worker_groups(obj: Obj) -> list[Obj]:
    groups = (obj.get("spec") or {}).get("workerGroupSpecs")
    return [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []


class TrainJobAdapter(MultiKueueAdapter):
    """``trainer.kubeflow.org`` TrainJob (Kueue's trainjob adapter): the copy leaves out Kueue's
    runtime patch (``runtimePatches[].manager: kueue.x-k8s.io/manager``, which holds the manager's
    admission), so the worker's Kueue adds and fills its own."""

    def remote_object(self, local: Obj, workload_name: str, origin: str) -> Obj:
        remote = super().remote_object(local, workload_name, origin)
        patches = remote["spec"].get("runtimePatches")
        if isinstance(patches, list):
            remote["spec"]["runtimePatches"] = [
                p for p in patches if not (isinstance(p, dict) and p.get("manager") == KUEUE_MANAGER)
            ]
        return remote


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in nested dicts, or None."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _pod_condition(pod: Obj, kind: str) -> Obj | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _for_creation(local: Obj, spec: Obj) -> Obj:
    """Kueue's ``CloneObjectMetaForCreation``: name, namespace, labels, annotations; and the spec."""
    meta = local.get("metadata") or {}
    out_meta: Obj = {"name": meta["name"], "namespace": meta.get("namespace")}
    for key in ("labels", "annotations"):
        if meta.get(key):
            out_meta[key] = dict(meta[key])
    return {
        "apiVersion": local.get("apiVersion"),
        "kind": local.get("kind"),
        "metadata": out_meta,
        "spec": spec,
    }


# The built-in adapters, by the integrations.frameworks name that enables them. A kind whose Kueue
# adapter only clears managedBy and copies the status back is one line here, e.g.
#   MultiKueueAdapter(PYTORCHJOBS, "kubeflow.org/pytorchjob", managed_by=("runPolicy", "managedBy")),
#   MultiKueueAdapter(RAY_JOBS, "ray.io/rayjob"),
BUILTIN: tuple[MultiKueueAdapter, ...] = (
    JobAdapter(JOBS, "batch/job"),
    MultiKueueAdapter(JOBSETS, "jobset.x-k8s.io/jobset"),
    PodAdapter(PODS, "pod"),
    # Kueue's kubeflowjob adapter: runPolicy.managedBy cleared on the copy, the status copied back.
    *(
        MultiKueueAdapter(kind, f"kubeflow.org/{kind.kind.lower()}", managed_by=("runPolicy", "managedBy"))
        for kind in (PYTORCH_JOBS, TF_JOBS, XGBOOST_JOBS, PADDLE_JOBS, JAX_JOBS, MPI_JOBS)
    ),
    TrainJobAdapter(TRAIN_JOBS, "trainer.kubeflow.org/trainjob"),
    # Kueue's ray.NewMKAdapter (RayJob, RayCluster) and appwrapper adapter: spec.managedBy cleared on
    # the copy, the whole status copied back. The RayCluster's (as the Job's) also resizes the copy
    # of an elastic job scaled on the manager (ElasticJobsViaWorkloadSlices): its `replicas` and
    # `with_replicas`; Kueue's other adapters have no elastic sync, and neither have kadmit's.
    MultiKueueAdapter(RAY_JOBS, "ray.io/rayjob"),
    RayClusterAdapter(RAY_CLUSTERS, "ray.io/raycluster"),
    MultiKueueAdapter(APPWRAPPERS, "workload.codeflare.dev/appwrapper"),
)


def builtin_adapters(frameworks: Iterable[str] | None = None) -> dict[str, MultiKueueAdapter]:
    """The built-in adapters by GVK string; only those of ``frameworks`` when given."""
    wanted = None if frameworks is None else set(frameworks)
    return {a.gvk: a for a in BUILTIN if wanted is None or a.framework in wanted}


# -- multiKueue.externalFrameworks

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def parse_external_name(name: Any) -> tuple[str, str, str]:
    """``Kind.version.group`` (Kueue's format for an external framework) → (group, version, kind).

    Raises ValueError with Kueue's message for a name that is not in that format.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("name is required")
    parts = name.split(".", 2)
    if len(parts) < 3 or not all(parts):
        raise ValueError(f"{name!r}: must be in 'kind.version.group' format")
    kind, version, group = parts
    if (
        not _KIND.fullmatch(kind)
        or not _DNS_LABEL.fullmatch(version)
        or not all(_DNS_LABEL.fullmatch(label) for label in group.split("."))
    ):
        raise ValueError(f"{name!r}: must be in 'kind.version.group' format")
    return group, version, kind


def external_frameworks(block: Mapping[str, Any], frameworks: Iterable[str] | None = None) -> tuple[str, ...]:
    """The GVK names of ``multiKueue.externalFrameworks``, checked as Kueue checks them: the format,
    no duplicates, no kind a built-in adapter (of the enabled ``frameworks``) already handles.

    Raises ValueError naming the offending entry.
    """
    entries = block.get("externalFrameworks")
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise ValueError("multiKueue.externalFrameworks: must be a list of {name: kind.version.group}")
    builtin = builtin_adapters(frameworks)
    seen: set[str] = set()
    names: list[str] = []
    for index, entry in enumerate(entries):
        path = f"multiKueue.externalFrameworks[{index}].name"
        if not isinstance(entry, Mapping) or set(entry) - {"name"}:
            raise ValueError(f"multiKueue.externalFrameworks[{index}]: must be an object with only 'name'")
        try:
            gvk = gvk_string(*parse_external_name(entry.get("name")))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        if gvk in seen:
            raise ValueError(f"{path}: Duplicate value: {entry['name']!r}")
        if gvk in builtin:
            raise ValueError(f"{path}: {entry['name']!r}: conflicts with a built-in MultiKueue adapter")
        seen.add(gvk)
        names.append(str(entry["name"]))
    return tuple(names)


def discovered_resource(listing: Obj, group: str, version: str, kind: str) -> Resource | None:
    """The resource serving ``kind`` in an API discovery document (``GET /apis/<group>/<version>``)."""
    for item in listing.get("resources") or []:
        name = str(item.get("name") or "")
        if item.get("kind") == kind and name and "/" not in name:
            return Resource(group, version, name, kind, bool(item.get("namespaced", True)))
    return None


def origin_selector(origin: str) -> str:
    return f"{ORIGIN_LABEL}={origin}"
