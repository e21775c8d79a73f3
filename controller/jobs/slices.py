"""Workload slices of elastic jobs, as Kueue's ``pkg/workloadslicing`` and its ``ElasticJobUngater``
keep them: pure functions over the job's Workloads and Pods (dicts in, decisions out); the job
reconciler does the writes.

An elastic job (``kueue.x-k8s.io/elastic-job: "true"``) scaled down keeps its Workload, whose
counts shrink in place. Scaled up, it gets a new Workload slice for its full new size,
annotated ``kueue.x-k8s.io/workload-slice-replacement-for: <namespace>/<old slice>`` and
``kueue.x-k8s.io/workload-slice-name: <first slice>``; the job keeps running meanwhile, its extra
Pods held by the ``kueue.x-k8s.io/elastic-job`` scheduling gate, which is lifted for as many
Pods as the active (latest admitted) slice grants.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kadmit import workload as ws
from kadmit.controller.jobs.podtemplate import PODSET_LABEL, SLICE_NAME_ANNOTATION
from kadmit.engine.parse import SLICE_REPLACEMENT_FOR
from kadmit.engine.slices import REPLACED_REASON
from kadmit.kube import Obj
from kadmit.webhook.jobs import ELASTIC_GATE
from kadmit.workload import ELASTIC_JOB_ANNOTATION
from kadmit.workload import scaled_down as scaled_down

counts = ws.pod_set_counts  # pod set name → count, by the name the job reconciler reads it
OUT_OF_SYNC = "OutOfSync"
OUT_OF_SYNC_MESSAGE = "The workload slice is out of sync with its parent job"
REPLACED_MESSAGE = "Replaced to accommodate a new workload slice"


def key(workload: Obj) -> str:
    """``namespace/name``, the value of ``workload-slice-replacement-for``."""
    meta = workload["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def slice_name(workload: Obj) -> str:
    """Kueue's ``SliceName``: the chain's first slice name."""
    meta = workload["metadata"]
    return str((meta.get("annotations") or {}).get(SLICE_NAME_ANNOTATION) or meta["name"])


def replaces(workload: Obj) -> str | None:
    value = ((workload.get("metadata") or {}).get("annotations") or {}).get(SLICE_REPLACEMENT_FOR)
    return str(value) if value else None


def _reserved(workload: Obj) -> bool:
    return ws.is_true(workload, ws.QUOTA_RESERVED)


def _evicted(workload: Obj) -> bool:
    return ws.is_true(workload, ws.EVICTED)


def oldest_first(workloads: Iterable[Obj]) -> list[Obj]:
    """``workloads`` oldest first (uid breaks ties), as Kueue lists slices."""
    return sorted(
        workloads,
        key=lambda w: (
            ws.parse_time(w["metadata"].get("creationTimestamp")) or 0.0,
            str(w["metadata"].get("uid", "")),
        ),
    )


def not_finished(owned: Iterable[Obj]) -> list[Obj]:
    """Kueue's ``FindNotFinishedWorkloads``: oldest first, none Finished."""
    return oldest_first(w for w in owned if not ws.is_true(w, ws.FINISHED))


def newest(workloads: Sequence[Obj]) -> Obj | None:
    """The last created of ``workloads`` (None: there are none)."""
    return oldest_first(workloads)[-1] if workloads else None


@dataclass(frozen=True)
class Normalized:
    """Kueue's ``normalizeActiveSlices``: the slice the job goes on with and the ones to finish."""

    selected: Obj | None
    finish: list[tuple[Obj, str, str, Obj | None]]
    """(slice, reason, message, the slice that replaces it if any) to finish."""


def normalize(live: Sequence[Obj]) -> Normalized:
    """One admitted slice (the head of the replacement chain), at most one pending slice that
    replaces it (the one selected), else the newest; every other slice is finished, with
    ``WorkloadSliceReplaced`` when a slice replaces it, else ``OutOfSync``."""
    replacements: dict[str, Obj] = {}
    for wl in live:
        target = replaces(wl)
        if target is not None and not _evicted(wl):
            existing = replacements.get(target)
            if existing is None or (not _reserved(existing) and _reserved(wl)):
                replacements[target] = wl
    latest_reserved: Obj | None = None
    latest: Obj | None = None
    for wl in live:
        if _evicted(wl):
            continue
        latest = wl
        if not _reserved(wl):
            continue
        successor = replacements.get(key(wl))
        if successor is not None and _reserved(successor):
            continue
        latest_reserved = wl
    pending: Obj | None = None
    if latest_reserved is not None:
        successor = replacements.get(key(latest_reserved))
        if successor is not None and not _reserved(successor):
            pending = successor
    selected = pending or latest_reserved or latest
    finish: list[tuple[Obj, str, str, Obj | None]] = []
    for wl in live:
        if wl is selected or wl is latest_reserved:
            continue
        successor = replacements.get(key(wl))
        if successor is not None:
            finish.append((wl, REPLACED_REASON, REPLACED_MESSAGE, successor))
        else:
            finish.append((wl, OUT_OF_SYNC, OUT_OF_SYNC_MESSAGE, None))
    return Normalized(selected, finish)


def as_slice(expected: Obj, live: Sequence[Obj]) -> Obj:
    """``expected`` (a new Workload for the job) marked as a slice (Kueue's ``prepareWorkloadSlice``):
    elastic, the chain's name, and the slice it replaces when one is running.

    A replacement keeps the replaced slice's pod sets with ``expected``'s counts: the running
    job's templates carry what its start injected (the flavors' node labels, kadmit's labels and
    annotations), and the Workload's templates are what a stop restores."""
    meta = expected["metadata"]
    annotations = dict(meta.get("annotations") or {})
    annotations[ELASTIC_JOB_ANNOTATION] = "true"
    spec = expected["spec"]
    if live:
        old = live[-1]
        annotations[SLICE_REPLACEMENT_FOR] = key(old)
        annotations[SLICE_NAME_ANNOTATION] = slice_name(old)
        want = counts(expected)
        old_sets = (old.get("spec") or {}).get("podSets") or []
        if {str(p.get("name")) for p in old_sets} == set(want):
            spec = {**spec, "podSets": [{**p, "count": want[str(p.get("name"))]} for p in old_sets]}
    else:
        annotations[SLICE_NAME_ANNOTATION] = meta["name"]
    return {**expected, "metadata": {**meta, "annotations": annotations}, "spec": spec}


def active_slice(live: Sequence[Obj]) -> Obj | None:
    """The latest slice that holds quota, is not being evicted and is Admitted (Kueue's
    ``FindLatestActiveWorkload`` and ``IsAdmitted``): its counts bound the ungated Pods. Of a
    slice and its replacement, both holding quota, the replacement (whatever their creation
    times: two slices made in the same second are not ordered by it)."""
    holding = [w for w in live if _reserved(w) and not _evicted(w)]
    succeeded = {replaces(w) for w in holding}
    for wl in reversed(holding):
        if key(wl) not in succeeded:
            return wl if ws.is_true(wl, ws.ADMITTED) else None
    return None


def is_gated(pod: Obj) -> bool:
    return any(g.get("name") == ELASTIC_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def _terminated(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_set_of(pod: Obj) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(PODSET_LABEL, ""))


def pods_to_ungate(pods: Iterable[Obj], granted: Mapping[str, int]) -> list[Obj]:
    """The ElasticJobUngater's choice: per pod set, the gated live Pods, lowest names first, up
    to what the active slice grants less the Pods already ungated."""
    gated: dict[str, list[Obj]] = {}
    running: dict[str, int] = {}
    for pod in pods:
        if _terminated(pod) or pod["metadata"].get("deletionTimestamp"):
            continue
        name = pod_set_of(pod)
        if is_gated(pod):
            gated.setdefault(name, []).append(pod)
        else:
            running[name] = running.get(name, 0) + 1
    chosen: list[Obj] = []
    for name, candidates in sorted(gated.items()):
        room = granted.get(name, 0) - running.get(name, 0)
        if room > 0:
            candidates.sort(key=lambda p: str(p["metadata"]["name"]))
            chosen += candidates[:room]
    return chosen


def ungate(pod: Obj) -> bool:
    """Remove the elastic-job scheduling gate from ``pod`` (False: it had none)."""
    spec = pod.get("spec") or {}
    gates = spec.get("schedulingGates") or []
    kept = [g for g in gates if g.get("name") != ELASTIC_GATE]
    if len(kept) == len(gates):
        return False
    if kept:
        spec["schedulingGates"] = kept
    else:
        spec.pop("schedulingGates", None)
    return True
