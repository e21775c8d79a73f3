"""Workload slices of elastic jobs (Kueue's ``ElasticJobsViaWorkloadSlices``).

An elastic job scaled up gets a new Workload, a *slice*, for its full new size, annotated
``kueue.x-k8s.io/workload-slice-replacement-for: <namespace>/<old>``. The slice is admitted when
the *delta* fits: the usage of the slice it replaces counts as available to it (Kueue's
``ReplacedWorkloadSlice`` and the flavor assigner's ``replaceWorkloadSlice``), and it keeps the
flavors of that slice. Once it is admitted the old slice is finished with reason
``WorkloadSliceReplaced`` and its quota is released, so the queue is charged the delta.

A delta that does not fit may preempt as any workload's request may (never the slice being
replaced); otherwise the slice waits and the job keeps running at its old size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kadmit.engine.flavors import (
    EXCEEDS_MAX_QUOTA,
    FIT,
    NO_FIT,
    NO_MATCHING_FLAVOR,
    PREEMPT,
    WAITING_FOR_QUOTA,
    Assignment,
    PodSetFlavors,
)
from kadmit.engine.model import FlavorResource, PodSet, PodSetAssignment, WorkloadKey
from kadmit.engine.quantity import MILLI, format_milli
from kadmit.engine.quota import QuotaNode, available, borrowing_level, potential_available

REPLACED_REASON = "WorkloadSliceReplaced"
"""Kueue's ``kueue.WorkloadSliceReplaced``: the Finished reason of a replaced slice."""


def replaced_message(uid: str, job_uid: str) -> str:
    """The Finished message of a replaced slice, as Kueue's scheduler writes it
    (``replaceWorkloadSlice``); ``uid`` is the new slice's."""
    return (
        f"Replaced to accommodate a workload (UID: {uid}, JobUID: {job_uid}) "
        "due to workload slice aggregation"
    )


@dataclass(slots=True, init=False)
class SliceAssignment(Assignment):
    """A new slice's assignment: ``usage`` is the delta over the slice it replaces (what must
    fit), ``charge`` the full usage its admission charges once the old slice is released."""

    replaced: WorkloadKey
    charge: dict[FlavorResource, int]

    def __init__(self, mode: int, replaced: WorkloadKey) -> None:
        Assignment.__init__(self, mode)  # not super(): slots=True makes a new class
        self.replaced = replaced
        self.charge = {}


def assign_slice(
    pod_sets: Sequence[PodSet],
    old: Sequence[PodSetAssignment],
    old_charge: Mapping[FlavorResource, int],
    replaced: WorkloadKey,
    node: QuotaNode,
    covers_pods: bool,
    may_preempt: Callable[[FlavorResource, int], bool] | None = None,
) -> SliceAssignment:
    """The flavors of the replaced slice (``old``, its ``status.admission.podSetAssignments``)
    for every pod set at its full count, and whether the delta over ``old_charge`` (what the old
    slice is charged) fits ``node`` today: Fit; Preempt where it does not but ``may_preempt``
    allows a victim search for it (the flavor assigner's test); else NoFit, with Kueue's reason
    and message."""
    result = SliceAssignment(mode=FIT, replaced=replaced)
    old_flavors = {psa.name: psa.flavors for psa in old}
    for pod_set in pod_sets:
        flavors = old_flavors.get(pod_set.name, {})
        requests = {res: value * pod_set.count for res, value in pod_set.requests.items()}
        if covers_pods:
            requests["pods"] = pod_set.count * MILLI
        chosen: dict[str, str] = {}
        for res, value in requests.items():
            flavor = flavors.get(res)
            if flavor is None:
                if value == 0:
                    continue
                result.mode = NO_FIT
                result.reason = NO_MATCHING_FLAVOR
                result.message = (
                    f"couldn't assign flavors to pod set {pod_set.name}: "
                    f"could not assign a flavor to {res} since the original workload has none"
                )
                return result
            chosen[res] = flavor
            fr = FlavorResource(flavor, res)
            result.charge[fr] = result.charge.get(fr, 0) + value
        result.pod_sets.append(
            PodSetFlavors(pod_set.name, pod_set.count, chosen, {res: requests[res] for res in chosen})
        )
        result.last_tried.append({})
    short: list[str] = []
    for fr, value in result.charge.items():
        delta = value - old_charge.get(fr, 0)
        if delta <= 0:
            continue
        result.usage[fr] = delta
        maximum = potential_available(node, fr)
        if delta > maximum:  # never fits, whatever is freed
            result.mode = NO_FIT
            result.reason = EXCEEDS_MAX_QUOTA
            result.message = (
                f"couldn't assign flavors to pod set {', '.join(ps.name for ps in pod_sets)}: "
                f"insufficient quota for {fr[1]} in flavor {fr[0]}, previously considered podsets "
                f"requests (0) + current podset request ({format_milli(fr[1], delta)}) > maximum "
                f"capacity ({format_milli(fr[1], maximum)})"
            )
            result.usage = {}
            result.borrowing = 0
            return result
        free = available(node, fr)
        if delta <= free:
            result.borrowing = max(result.borrowing, borrowing_level(node, fr, delta))
            continue
        short.append(
            f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, "
            f"{format_milli(fr[1], delta - max(free, 0))} more needed"
        )
        if may_preempt is not None and may_preempt(fr, delta):
            result.needs_preemption.add(fr)
            result.mode = min(result.mode, PREEMPT)
            if delta > node.nominal.get(fr, 0):  # borrows even once its victims are gone
                result.borrowing = max(result.borrowing, borrowing_level(node, fr, delta))
        else:
            result.mode = NO_FIT
    if result.mode == NO_FIT:
        result.borrowing = 0
    if short:
        result.reason = WAITING_FOR_QUOTA
        names = ", ".join(ps.name for ps in pod_sets)
        result.message = f"couldn't assign flavors to pod set {names}: {', '.join(short)}"
    return result


__all__ = ["REPLACED_REASON", "SliceAssignment", "assign_slice", "replaced_message"]
