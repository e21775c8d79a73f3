"""CRD conversion between ``kueue.x-k8s.io/v1beta1`` and ``v1beta2`` (contract §1.11), at ``/convert``.

The API server stores v1beta2 and still serves v1beta1, so every v1beta1 read and write passes
through here. Each kind's conversion is a pair of functions on plain dicts that rename, wrap or
drop exactly the fields Kueue's conversion functions do; what exists in only one version is
dropped on the way to the other, as in Kueue. The ``topologyAssignment`` re-encoding is lossless.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kadmit.webhook.objects import mapping as _m
from kadmit.webhook.review import BadRequest
from kadmit.workload import Obj

GROUP = "kueue.x-k8s.io"
V1BETA1 = f"{GROUP}/v1beta1"
V1BETA2 = f"{GROUP}/v1beta2"
CONVERSION_API_VERSION = "apiextensions.k8s.io/v1"


class ConversionError(ValueError):
    """An object this webhook cannot convert (reported as a failed ConversionReview)."""


def _rename(obj: dict[str, Any], old: str, new: str) -> None:
    if old in obj:
        obj[new] = obj.pop(old)


# -- ClusterQueue ----------------------------------------------------------------------------------


def cluster_queue_up(cq: Obj) -> None:
    spec = _m(cq.get("spec"))
    _rename(spec, "cohort", "cohortName")
    checks = spec.pop("admissionChecks", None)
    if checks:
        # A non-empty v1beta1 list replaces any strategy, as Kueue's conversion does.
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in checks]}
    fungibility = _m(spec.get("flavorFungibility"))
    if fungibility.get("whenCanBorrow") == "Borrow":
        fungibility["whenCanBorrow"] = "MayStopSearch"
    if fungibility.get("whenCanPreempt") == "Preempt":
        fungibility["whenCanPreempt"] = "MayStopSearch"
    status = _m(cq.get("status"))
    status.pop("pendingWorkloadsStatus", None)
    _m(status.get("fairSharing")).pop("admissionFairSharingStatus", None)


def cluster_queue_down(cq: Obj) -> None:
    spec = _m(cq.get("spec"))
    _rename(spec, "cohortName", "cohort")
    spec.pop("concurrentAdmissionPolicy", None)


# -- LocalQueue and Cohort -------------------------------------------------------------------------


def local_queue_up(queue: Obj) -> None:
    status = _m(queue.get("status"))
    _rename(status, "flavorUsage", "flavorsUsage")
    status.pop("flavors", None)


def local_queue_down(queue: Obj) -> None:
    _rename(_m(queue.get("status")), "flavorsUsage", "flavorUsage")


def cohort_up(cohort: Obj) -> None:
    _m(_m(cohort.get("status")).get("fairSharing")).pop("admissionFairSharingStatus", None)


def nothing(_: Obj) -> None:
    """Same schema in both versions: only the apiVersion changes."""


# -- Workload --------------------------------------------------------------------------------------

_SOURCES = {
    "kueue.x-k8s.io/workloadpriorityclass": (GROUP, "WorkloadPriorityClass"),
    "scheduling.k8s.io/priorityclass": ("scheduling.k8s.io", "PriorityClass"),
}


def _assignments(workload: Obj) -> list[dict[str, Any]]:
    admission = _m(_m(workload.get("status")).get("admission"))
    return [a for a in admission.get("podSetAssignments") or [] if isinstance(a, dict)]


def workload_up(workload: Obj) -> None:
    spec = _m(workload.get("spec"))
    source = spec.pop("priorityClassSource", "") or ""
    name = spec.pop("priorityClassName", "") or ""
    if source:
        if source not in _SOURCES:
            raise ConversionError(f"spec.priorityClassSource {source!r} is not one of {', '.join(_SOURCES)}")
        group, kind = _SOURCES[source]
        spec["priorityClassRef"] = {"group": group, "kind": kind, "name": name}
    status = _m(workload.get("status"))
    _rename(status, "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")
    for assignment in _assignments(workload):
        if isinstance(assignment.get("topologyAssignment"), dict):
            assignment["topologyAssignment"] = topology_up(assignment["topologyAssignment"])


def workload_down(workload: Obj) -> None:
    spec = _m(workload.get("spec"))
    ref = spec.pop("priorityClassRef", None)
    if isinstance(ref, dict):
        for source, (group, kind) in _SOURCES.items():
            if (ref.get("group"), ref.get("kind")) == (group, kind):
                spec["priorityClassSource"] = source
                spec["priorityClassName"] = ref.get("name", "")
                break
        else:
            raise ConversionError(
                f"spec.priorityClassRef {ref.get('group')}/{ref.get('kind')} has no v1beta1 form"
            )
    spec.pop("preemptionGates", None)
    for pod_set in spec.get("podSets") or []:
        _m(_m(pod_set).get("topologyRequest")).pop("podsetSliceRequiredTopologyConstraints", None)
    status = _m(workload.get("status"))
    status.pop("preemptionGates", None)
    _rename(status, "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds")
    for assignment in _assignments(workload):
        if isinstance(assignment.get("topologyAssignment"), dict):
            assignment["topologyAssignment"] = topology_down(assignment["topologyAssignment"])


def _common_prefix(values: list[str]) -> str:
    shortest = min(values, key=len)
    for i, char in enumerate(shortest):
        if any(v[i] != char for v in values):
            return shortest[:i]
    return shortest


def _level_values(values: list[str]) -> dict[str, Any]:
    if len(set(values)) == 1:
        return {"universal": values[0]}
    prefix = _common_prefix(values)
    rests = [v[len(prefix) :] for v in values]
    suffix = _common_prefix([r[::-1] for r in rests])[::-1]
    individual: dict[str, Any] = {}
    if prefix:
        individual["prefix"] = prefix
    if suffix:
        individual["suffix"] = suffix
    individual["roots"] = [r[: len(r) - len(suffix)] for r in rests]
    return {"individual": individual}


def topology_up(assignment: Obj) -> Obj:
    """v1beta1 ``{levels, domains[{values, count}]}`` → v1beta2 ``{levels, slices[...]}``, in one slice."""
    levels = list(assignment.get("levels") or [])
    domains = [_m(d) for d in assignment.get("domains") or []]
    result: Obj = {"levels": levels, "slices": []}
    if not domains:
        return result
    for d in domains:
        if len(d.get("values") or []) != len(levels):
            raise ConversionError("topologyAssignment.domains[].values must have one value per level")
    counts = [int(d.get("count", 0)) for d in domains]
    result["slices"].append(
        {
            "domainCount": len(domains),
            "valuesPerLevel": [
                _level_values([str(d["values"][i]) for d in domains]) for i in range(len(levels))
            ],
            "podCounts": {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts},
        }
    )
    return result


def topology_down(assignment: Obj) -> Obj:
    """v1beta2 slices → v1beta1 domains, in order."""
    levels = list(assignment.get("levels") or [])
    domains: list[Obj] = []
    for s, raw in enumerate(assignment.get("slices") or []):
        piece = _m(raw)
        count = int(piece.get("domainCount", 0))
        per_level: list[list[str]] = []
        for level in piece.get("valuesPerLevel") or []:
            level = _m(level)
            if "universal" in level:
                per_level.append([str(level["universal"])] * count)
            else:
                individual = _m(level.get("individual"))
                prefix, suffix = individual.get("prefix", ""), individual.get("suffix", "")
                per_level.append([f"{prefix}{root}{suffix}" for root in individual.get("roots") or []])
        pods = _m(piece.get("podCounts"))
        counts = (
            [int(pods["universal"])] * count
            if "universal" in pods
            else [int(c) for c in pods.get("individual") or []]
        )
        if len(per_level) != len(levels) or any(len(v) != count for v in per_level) or len(counts) != count:
            raise ConversionError(f"topologyAssignment.slices[{s}] does not match its domainCount and levels")
        for i in range(count):
            domains.append({"values": [values[i] for values in per_level], "count": counts[i]})
    return {"levels": levels, "domains": domains}


# -- MultiKueue and the rest -----------------------------------------------------------------------


def multikueue_cluster_up(cluster: Obj) -> None:
    spec = _m(cluster.get("spec"))
    source: dict[str, Any] = {}
    for key in ("kubeConfig", "clusterProfileRef"):
        if spec.get(key) is not None:
            source[key] = spec.pop(key)
        else:
            spec.pop(key, None)
    if source:
        spec["clusterSource"] = source


def multikueue_cluster_down(cluster: Obj) -> None:
    spec = _m(cluster.get("spec"))
    spec.update(_m(spec.pop("clusterSource", None)))


def admission_check_up(check: Obj) -> None:
    _m(check.get("spec")).pop("retryDelayMinutes", None)


def multikueue_config_down(config: Obj) -> None:
    _m(config.get("spec")).pop("quotaManagement", None)


Step = Callable[[Obj], None]
CONVERSIONS: dict[str, tuple[Step, Step]] = {
    "ClusterQueue": (cluster_queue_up, cluster_queue_down),
    "LocalQueue": (local_queue_up, local_queue_down),
    "Cohort": (cohort_up, nothing),
    "Workload": (workload_up, workload_down),
    "MultiKueueCluster": (multikueue_cluster_up, multikueue_cluster_down),
    "AdmissionCheck": (admission_check_up, nothing),
    "MultiKueueConfig": (nothing, multikueue_config_down),
    "ResourceFlavor": (nothing, nothing),
    "WorkloadPriorityClass": (nothing, nothing),
    "ProvisioningRequestConfig": (nothing, nothing),
    "Topology": (nothing, nothing),
}


def convert(obj: Obj, desired: str) -> Obj:
    """A converted copy of ``obj`` in ``desired`` (``kueue.x-k8s.io/v1beta1`` or ``/v1beta2``)."""
    kind, current = obj.get("kind"), obj.get("apiVersion")
    if desired not in (V1BETA1, V1BETA2):
        raise ConversionError(f"cannot convert to {desired}: only {V1BETA1} and {V1BETA2} are served")
    if current not in (V1BETA1, V1BETA2):
        raise ConversionError(f"cannot convert from {current}: only {V1BETA1} and {V1BETA2} are served")
    if not isinstance(kind, str) or kind not in CONVERSIONS:
        raise ConversionError(f"kind {kind!r} has no conversion")
    result = copy.deepcopy(obj)
    if current != desired:
        up, down = CONVERSIONS[str(kind)]
        try:
            (up if desired == V1BETA2 else down)(result)
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            if isinstance(exc, ConversionError):
                raise
            name = _m(obj.get("metadata")).get("name", "")
            raise ConversionError(f"{kind} {name!r} has a field of an unexpected type ({exc})") from None
    result["apiVersion"] = desired
    return result


async def handle_conversion_review(document: Obj) -> Obj:
    """The ``/convert`` endpoint: a ConversionReview in, a ConversionReview out.

    A malformed review is a 400; an object that cannot be converted fails the whole review with
    the reason, as the API server expects (it then fails the client's request).
    """
    if document.get("apiVersion") != CONVERSION_API_VERSION or document.get("kind") != "ConversionReview":
        raise BadRequest(
            f"expected an {CONVERSION_API_VERSION} ConversionReview, got "
            f"{document.get('apiVersion')!s}/{document.get('kind')!s}"
        )
    request = document.get("request")
    if not isinstance(request, dict):
        raise BadRequest("ConversionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadRequest("ConversionReview.request.uid is missing")
    desired = request.get("desiredAPIVersion")
    objects = request.get("objects")
    if not isinstance(desired, str) or not isinstance(objects, list):
        raise BadRequest("ConversionReview.request needs desiredAPIVersion and objects")
    response: Obj = {"uid": uid}
    try:
        converted = []
        for i, obj in enumerate(objects):
            if not isinstance(obj, dict):
                raise ConversionError(f"objects[{i}] is not an object")
            converted.append(convert(obj, desired))
    except ConversionError as exc:
        response["convertedObjects"] = []
        response["result"] = {"status": "Failure", "message": str(exc)}
    else:
        response["convertedObjects"] = converted
        response["result"] = {"status": "Success"}
    return {"apiVersion": CONVERSION_API_VERSION, "kind": "ConversionReview", "response": response}
