"""Kueue's API (``kueue.x-k8s.io``) as structural schemas, for both served versions.

Written from the Kueue contract (§1): fields, enums, limits, defaults, list-map keys and the CEL
rules Kueue declares on its Go types. ``version`` is ``"v1beta2"`` (storage, the conversion hub)
or ``"v1beta1"`` (served, deprecated); every difference between the two (§1.11) is an explicit
branch below, so the v1beta1 schema accepts exactly the v1beta1 field names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openapi import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    QUALIFIED_NAME,
    Schema,
    arr,
    boolean,
    by_name,
    conditions,
    date_time,
    dict_of,
    integer,
    label_selector,
    name_ref,
    obj,
    pod_template,
    quantity,
    resource_list,
    string,
    string_map,
    taint,
    tolerations,
)

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")
DEPRECATION_WARNING = "This version is deprecated. Use v1beta2 instead."

PrinterColumn = dict[str, Any]


def column(name: str, json_path: str, kind: str, description: str, priority: int = 0) -> PrinterColumn:
    col: PrinterColumn = {"description": description, "jsonPath": json_path, "name": name}
    if priority:
        col["priority"] = priority
    col["type"] = kind
    return col


AGE = column("Age", ".metadata.creationTimestamp", "date", "Time this object was created")


# --- Pieces shared by several kinds ------------------------------------------------------------


def stop_policy(what: str) -> Schema:
    return string(
        f"If not None, the {what} is inactive: Hold keeps admitted workloads running, HoldAndDrain "
        "evicts them; reservations that are not yet admitted are cancelled in both cases.",
        enum=["None", "Hold", "HoldAndDrain"],
        default="None",
    )


def fair_sharing_spec() -> Schema:
    return obj(
        {
            "weight": quantity(
                "Relative advantage when competing for unused quota; 0 means an infinite share "
                "whenever it borrows. When not 0 it must be greater than 1e-9.",
                default=1,
            )
        },
        "Properties used when Fair Sharing is enabled in the configuration.",
    )


def admission_fair_sharing_status() -> Schema:
    return obj(
        {
            "consumedResources": resource_list("Aggregated usage over time, with decay applied."),
            "lastUpdate": date_time("When the share and consumed resources were updated."),
        },
        required=["consumedResources", "lastUpdate"],
    )


def fair_sharing_status(*, with_admission: bool) -> Schema:
    props: dict[str, Schema] = {
        "weightedShare": integer(
            "Maximum over resources of usage above nominal quota, relative to the lendable "
            "resources of the cohort, divided by the weight.",
            fmt="int64",
        )
    }
    if with_admission:
        props["admissionFairSharingStatus"] = admission_fair_sharing_status()
    return obj(props, required=["weightedShare"])


def resource_quota() -> Schema:
    return obj(
        {
            "name": string("Name of the resource, e.g. cpu, memory, nvidia.com/gpu."),
            "nominalQuota": quantity("Quantity available to workloads of this queue; must be >= 0."),
            "borrowingLimit": quantity(
                "Most this queue may borrow from its cohort; null means no limit. Must be null "
                "without a cohort."
            ),
            "lendingLimit": quantity(
                "Most of the unused nominal quota this queue lends to its cohort; null means all."
            ),
        },
        required=["name", "nominalQuota"],
    )


def resource_groups(max_items: int = 16) -> Schema:
    flavor_quotas = obj(
        {
            "name": name_ref("A ResourceFlavor."),
            "resources": by_name(
                resource_quota(),
                "Quotas of this flavor, one per covered resource, in the same order.",
                min_items=1,
                max_items=64,
            ),
        },
        required=["name", "resources"],
    )
    group = obj(
        {
            "coveredResources": arr(
                string(), "Resources covered by the flavors of this group.", min_items=1, max_items=64
            ),
            "flavors": by_name(
                flavor_quotas,
                "Flavors providing the resources of this group, in order of preference.",
                min_items=1,
                max_items=64,
            ),
        },
        required=["coveredResources", "flavors"],
        rules=[
            (
                "self.flavors.all(x, size(x.resources) == size(self.coveredResources))",
                "flavors must have the same number of resources as the coveredResources",
            )
        ],
    )
    return arr(group, "Groups of resources with the flavors that provide them.", max_items=max_items)


def flavor_usage(*, with_borrowed: bool, max_resources: int) -> Schema:
    resource: dict[str, Schema] = {
        "name": string("Name of the resource."),
        "total": quantity("Total quantity in use, including what is borrowed."),
    }
    if with_borrowed:
        resource["borrowed"] = quantity("Quantity in use above the nominal quota.")
    return obj(
        {
            "name": name_ref("Name of the flavor."),
            "resources": by_name(
                obj(resource, required=["name"]), max_items=max_resources
            ),
        },
        required=["name", "resources"],
    )


# --- ResourceFlavor ----------------------------------------------------------------------------


def resource_flavor(version: str) -> tuple[Schema | None, Schema | None, list[tuple[str, str]]]:
    spec = obj(
        {
            "nodeLabels": string_map(
                "Labels of the nodes that provide this flavor; merged into the pods' nodeSelector.",
                max_properties=8,
                map_type="atomic",
            ),
            "nodeTaints": arr(
                taint(),
                "Taints of the nodes of this flavor; a pod set must tolerate the NoSchedule and "
                "NoExecute ones to be assigned the flavor.",
                max_items=8,
                rules=[
                    (
                        "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
                        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
                    )
                ],
            ),
            "tolerations": tolerations("Tolerations added to the pods admitted with this flavor."),
            "topologyName": name_ref("A Topology; makes this a Topology Aware Scheduling flavor."),
        },
        "Node labels, taints and tolerations that define this flavor.",
        rules=[
            (
                "!has(self.topologyName) || (has(self.nodeLabels) && size(self.nodeLabels) >= 1)",
                "at least one nodeLabel is required when topology is set",
            ),
            (
                "!has(oldSelf.topologyName) || self == oldSelf",
                "resourceFlavorSpec are immutable when topologyName is set",
            ),
        ],
    )
    return spec, None, []


# --- ClusterQueue ------------------------------------------------------------------------------


def cluster_queue(version: str) -> tuple[Schema | None, Schema | None, list[tuple[str, str]]]:
    v1 = version == "v1beta1"
    cohort_field = "cohort" if v1 else "cohortName"
    borrow_values = ["MayStopSearch", "TryNextFlavor", *(["Borrow"] if v1 else [])]
    preempt_values = ["MayStopSearch", "TryNextFlavor", *(["Preempt"] if v1 else [])]
    props: dict[str, Schema] = {
        "resourceGroups": resource_groups(),
        cohort_field: name_ref("Cohort this ClusterQueue belongs to; members borrow unused quota."),
        "queueingStrategy": string(
            "StrictFIFO: the oldest workload blocks newer ones; BestEffortFIFO: workloads that do "
            "not fit do not block the ones behind them.",
            enum=["StrictFIFO", "BestEffortFIFO"],
            default="BestEffortFIFO",
        ),
        "namespaceSelector": label_selector(
            "Namespaces allowed to submit workloads; null matches none, {} matches all."
        ),
        "flavorFungibility": obj(
            {
                "whenCanBorrow": string(
                    "MayStopSearch: take the flavor even if it needs borrowing; TryNextFlavor: try "
                    "the next flavor first."
                    + (" Borrow is the deprecated name of MayStopSearch." if v1 else ""),
                    enum=borrow_values,
                    default="MayStopSearch",
                ),
                "whenCanPreempt": string(
                    "MayStopSearch: take the flavor even if it needs preemption; TryNextFlavor: try "
                    "the next flavor first."
                    + (" Preempt is the deprecated name of MayStopSearch." if v1 else ""),
                    enum=preempt_values,
                    default="TryNextFlavor",
                ),
                "preference": string(
                    "Which to prefer when every flavor needs borrowing or preemption.",
                    enum=["BorrowingOverPreemption", "PreemptionOverBorrowing"],
                ),
            },
            "Whether to try the next flavor before borrowing or preempting in the current one.",
            default={},
            rules=[
                (
                    "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && "
                    "self.whenCanPreempt == 'TryNextFlavor')",
                    "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
                )
            ],
        ),
        "preemption": obj(
            {
                "reclaimWithinCohort": string(
                    "Whether a workload that fits its nominal quota may preempt workloads of other "
                    "queues of the cohort that borrow.",
                    enum=["Never", "LowerPriority", "Any"],
                    default="Never",
                ),
                "borrowWithinCohort": obj(
                    {
                        "policy": string(
                            "Whether a borrowing workload may preempt in other queues of the cohort.",
                            enum=["Never", "LowerPriority"],
                            default="Never",
                        ),
                        "maxPriorityThreshold": integer(
                            "Only workloads with at most this priority may be preempted."
                        ),
                    },
                    default={},
                ),
                "withinClusterQueue": string(
                    "Whether a workload that does not fit may preempt workloads of this queue.",
                    enum=["Never", "LowerPriority", "LowerOrNewerEqualPriority"],
                    default="Never",
                ),
            },
            "Preemption policies.",
            default={},
            rules=[
                (
                    "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && "
                    "self.borrowWithinCohort.policy != 'Never')",
                    "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
                )
            ],
        ),
        "admissionChecksStrategy": obj(
            {
                "admissionChecks": by_name(
                    obj(
                        {
                            "name": string("An AdmissionCheck.", min_length=1, max_length=316),
                            "onFlavors": arr(
                                name_ref(),
                                "Flavors this check runs for; empty means every flavor.",
                                list_type="set",
                                max_items=64,
                            ),
                        },
                        required=["name"],
                    ),
                    min_items=1,
                    max_items=64,
                )
            },
            "Which AdmissionChecks a workload of this queue needs, per flavor.",
            required=["admissionChecks"],
        ),
        "stopPolicy": stop_policy("ClusterQueue"),
        "fairSharing": fair_sharing_spec(),
        "admissionScope": obj(
            {
                "admissionMode": string(
                    "Whether Admission Fair Sharing orders this queue's workloads.",
                    enum=["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"],
                )
            },
            required=["admissionMode"],
        ),
    }
    if v1:
        props["admissionChecks"] = arr(
            string(min_length=1, max_length=316),
            "AdmissionChecks every workload of this queue needs (use admissionChecksStrategy in v1beta2).",
        )
    else:
        props["concurrentAdmissionPolicy"] = obj(
            {
                "migration": obj(
                    {
                        "mode": string(
                            "TryPreferredFlavors: move to a preferred flavor when it frees up; "
                            "RetainFirstAdmission: stay.",
                            enum=["TryPreferredFlavors", "RetainFirstAdmission"],
                            max_length=253,
                        ),
                        "constraints": obj(
                            {"lastAcceptableFlavorName": name_ref("The last flavor a workload may move to.")}
                        ),
                    },
                    required=["mode"],
                )
            },
            "Lets a workload pursue several flavors at once (alpha, ConcurrentAdmission).",
            required=["migration"],
            rules=[("self == oldSelf", "concurrentAdmissionPolicy is immutable")],
        )
    spec_rules = [
        (
            f"!has(self.{cohort_field}) && has(self.resourceGroups) ? self.resourceGroups.all(rg, "
            "rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true",
            "borrowingLimit must be nil when cohort is empty",
        )
    ]
    spec = obj(
        props, "Quotas, cohort, queueing and preemption policies of the ClusterQueue.", rules=spec_rules
    )

    status_props: dict[str, Schema] = {
        "conditions": conditions("Active (and MultiKueueManagerQuotaAutomation)."),
        "flavorsReservation": by_name(
            flavor_usage(with_borrowed=True, max_resources=64),
            "Quota reserved by workloads with QuotaReserved=True, per flavor.",
            max_items=64,
        ),
        "flavorsUsage": by_name(
            flavor_usage(with_borrowed=True, max_resources=64),
            "Quota used by admitted workloads, per flavor.",
            max_items=64,
        ),
        "pendingWorkloads": integer("Workloads waiting for admission."),
        "reservingWorkloads": integer("Workloads holding a quota reservation."),
        "admittedWorkloads": integer("Admitted workloads that have not finished."),
        "fairSharing": fair_sharing_status(with_admission=v1),
    }
    if v1:
        status_props["pendingWorkloadsStatus"] = obj(
            {
                "clusterQueuePendingWorkload": arr(
                    obj({"name": string(), "namespace": string()}, required=["name", "namespace"])
                ),
                "lastChangeTime": date_time(),
            },
            "Deprecated and unused since v0.14.",
            required=["lastChangeTime"],
        )
    return spec, obj(status_props), []


# --- LocalQueue --------------------------------------------------------------------------------


def local_queue(version: str) -> tuple[Schema | None, Schema | None, list[tuple[str, str]]]:
    v1 = version == "v1beta1"
    cq_ref = name_ref("The ClusterQueue that backs this LocalQueue.")
    cq_ref["x-kubernetes-validations"] = [{"message": "field is immutable", "rule": "self == oldSelf"}]
    spec = obj(
        {
            "clusterQueue": cq_ref,
            "stopPolicy": stop_policy("LocalQueue"),
            "fairSharing": fair_sharing_spec(),
        },
        "The ClusterQueue this namespace's workloads go to.",
    )
    usage = by_name(
        flavor_usage(with_borrowed=False, max_resources=16),
        max_items=16,
    )
    status_props: dict[str, Schema] = {
        "conditions": conditions("Active."),
        "pendingWorkloads": integer("Workloads of this queue not yet admitted."),
        "reservingWorkloads": integer("Workloads of this queue holding a reservation."),
        "admittedWorkloads": integer("Admitted workloads of this queue that have not finished."),
        "flavorsReservation": usage,
        ("flavorUsage" if v1 else "flavorsUsage"): usage,
        "fairSharing": fair_sharing_status(with_admission=True),
    }
    if v1:
        status_props["flavors"] = by_name(
            obj(
                {
                    "name": name_ref(),
                    "resources": arr(string(), list_type="set", max_items=16),
                    "nodeLabels": string_map(max_properties=8),
                    "nodeTaints": arr(taint(), max_items=8),
                    "topology": obj(
                        {
                            "name": name_ref(),
                            "levels": arr(string(max_length=317), min_items=1, max_items=16),
                        },
                        required=["levels", "name"],
                    ),
                },
                required=["name"],
            ),
            "Flavors of the backing ClusterQueue (removed in v1beta2).",
            max_items=16,
        )
    return spec, obj(status_props), []


# --- Cohort ------------------------------------------------------------------------------------


def cohort(version: str) -> tuple[Schema | None, Schema | None, list[tuple[str, str]]]:
    spec = obj(
        {
            "parentName": name_ref("Parent cohort; unset makes this cohort the root of a tree."),
            "resourceGroups": resource_groups(),
            "fairSharing": fair_sharing_spec(),
        },
        "Parent, extra shared quota and fair-sharing weight of the cohort.",
    )
    status = obj({"fairSharing": fair_sharing_status(with_admission=version == "v1beta1")})
    return spec, status, []


# --- Workload ----------------------------------------------------------------------------------


def topology_request(version: str) -> Schema:
    props: dict[str, Schema] = {
        "required": string("Topology level the pod set requires.", max_length=63),
        "preferred": string("Topology level the pod set prefers.", max_length=63),
        "unconstrained": boolean("Place the pod set anywhere in the available capacity."),
        "podIndexLabel": string("Label that indexes the pods.", max_length=317),
        "subGroupIndexLabel": string(
            "Label that indexes replicated jobs within the pod set.", max_length=317
        ),
        "subGroupCount": integer("Number of replicated jobs within the pod set."),
        "podSetGroupName": string("Pod sets of a group get the same flavor.", max_length=256),
        "podSetSliceRequiredTopology": string("Topology level required per slice.", max_length=63),
        "podSetSliceSize": integer("Pods per slice."),
    }
    if version == "v1beta2":
        props["podsetSliceRequiredTopologyConstraints"] = arr(
            obj(None, "One constraint (alpha; stored as sent).", preserve_unknown=True),
            "Additional per-slice topology constraints.",
            max_items=3,
        )
    return obj(props, "Topology Aware Scheduling request of the pod set.")


def topology_assignment(version: str) -> Schema:
    levels = arr(string(max_length=317), "Node label keys of the assigned levels.", min_items=1, max_items=16)
    if version == "v1beta1":
        domain = obj(
            {
                "values": arr(string(max_length=63), min_items=1, max_items=16),
                "count": integer(minimum=1),
            },
            required=["values", "count"],
        )
        return obj(
            {"levels": levels, "domains": arr(domain, max_items=100000)},
            required=["levels", "domains"],
        )
    level_values = obj(
        {
            "universal": string("The value shared by every domain of the slice.", max_length=63),
            "individual": obj(
                {
                    "prefix": string(max_length=63),
                    "suffix": string(max_length=63),
                    "roots": arr(string(max_length=63), min_items=1, max_items=100000),
                },
                required=["roots"],
            ),
        },
        rules=[
            (
                "has(self.universal) != has(self.individual)",
                "exactly one of universal, individual must be set",
            )
        ],
    )
    pod_counts = obj(
        {
            "universal": integer("Pods in every domain of the slice.", minimum=0),
            "individual": arr(integer(minimum=0), min_items=1, max_items=100000),
        },
        rules=[
            (
                "has(self.universal) != has(self.individual)",
                "exactly one of universal, individual must be set",
            )
        ],
    )
    slice_ = obj(
        {
            "domainCount": integer(minimum=1),
            "valuesPerLevel": arr(level_values, min_items=1, max_items=16),
            "podCounts": pod_counts,
        },
        required=["domainCount", "valuesPerLevel", "podCounts"],
        rules=[
            (
                "self.valuesPerLevel.all(x, !has(x.individual) || "
                "size(x.individual.roots) == self.domainCount)",
                "individual roots must have length equal to domainCount",
            ),
            (
                "!has(self.podCounts.individual) || size(self.podCounts.individual) == self.domainCount",
                "individual podCounts must have length equal to domainCount",
            ),
        ],
    )
    return obj(
        {"levels": levels, "slices": arr(slice_, max_items=1000)},
        "Pods per topology domain.",
        required=["levels", "slices"],
        rules=[
            (
                "self.slices.all(x, size(x.valuesPerLevel) == size(self.levels))",
                "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment",
            )
        ],
    )


def pod_set(version: str) -> Schema:
    return obj(
        {
            "name": {**name_ref("Name of the pod set.", label=True), "default": "main"},
            "template": pod_template(
                "The pods' template; only labels and annotations matter in its metadata."
            ),
            "count": integer("Number of pods.", default=1, minimum=0),
            "minCount": integer("Fewest pods acceptable under partial admission.", minimum=1),
            "topologyRequest": topology_request(version),
        },
        required=["template"],
        rules=[
            (
                "has(self.minCount) ? self.minCount <= self.count : true",
                "minCount should be positive and less or equal to count",
            )
        ],
    )


def pod_set_update() -> Schema:
    return obj(
        {
            "name": name_ref("The pod set to modify.", label=True),
            "labels": string_map(),
            "annotations": string_map(),
            "nodeSelector": string_map(),
            "tolerations": tolerations("Tolerations to add."),
        },
        required=["name"],
    )


def admission_check_state() -> Schema:
    return obj(
        {
            "name": string("The AdmissionCheck.", min_length=1, max_length=316),
            "state": string(enum=["Pending", "Ready", "Retry", "Rejected"]),
            "lastTransitionTime": date_time(),
            "message": string(max_length=32768),
            "requeueAfterSeconds": integer("Wait before retrying, for a Retry state.", minimum=0),
            "retryCount": integer("Retry-driven evictions so far (maintained by Kueue).", minimum=0),
            "podSetUpdates": arr(pod_set_update(), "Changes to apply to the pods on start.", max_items=18),
        },
        required=["lastTransitionTime", "message", "name", "state"],
    )


def preemption_gate(description: str) -> Schema:
    # An alpha API whose fields beyond the name are still moving: kept as sent, keyed by name.
    return by_name(
        obj({"name": string(min_length=1, max_length=316)}, required=["name"], preserve_unknown=True),
        description,
        max_items=8,
    )


def _quota_reserved(side: str) -> str:
    return (
        f"has({side}.status) && has({side}.status.conditions) && "
        f"{side}.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')"
    )


def _admitted(side: str) -> str:
    return (
        f"has({side}.status) && has({side}.status.conditions) && "
        f"{side}.status.conditions.exists(c, c.type == 'Admitted' && c.status == 'True')"
    )


def workload(version: str) -> tuple[Schema | None, Schema | None, list[tuple[str, str]]]:
    v1 = version == "v1beta1"
    spec_props: dict[str, Schema] = {
        "podSets": by_name(
            pod_set(version),
            "Sets of identical pods, each a template and a count.",
            min_items=1,
            max_items=18,
        ),
        "queueName": name_ref("The LocalQueue, in the workload's namespace."),
        "priority": integer("Priority, filled from the priority class; higher goes first."),
        "active": boolean("false evicts the workload and keeps it out of the queues.", default=True),
        "maximumExecutionTimeSeconds": integer(
            "Admitted time after which the workload is deactivated.", minimum=1
        ),
    }
    if v1:
        spec_props["priorityClassSource"] = string(
            "Where priorityClassName is looked up.",
            enum=["kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass", ""],
            default="",
        )
        spec_props["priorityClassName"] = string("The priority class.")
        spec_rules = [
            (
                "!has(self.priorityClassName) || has(self.priority)",
                "priority should not be nil when priorityClassName is set",
            )
        ]
    else:
        spec_props["priorityClassRef"] = obj(
            {
                "group": string(enum=["kueue.x-k8s.io", "scheduling.k8s.io"]),
                "kind": string(enum=["WorkloadPriorityClass", "PriorityClass"]),
                "name": string(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN),
            },
            "The priority class that gives the workload its priority.",
            required=["group", "kind", "name"],
            rules=[
                (
                    "(self.group == 'scheduling.k8s.io') ? self.kind == 'PriorityClass' : true",
                    "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
                ),
                (
                    "(self.group == 'kueue.x-k8s.io') ? self.kind == 'WorkloadPriorityClass' : true",
                    "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
                ),
            ],
        )
        spec_props["preemptionGates"] = preemption_gate(
            "Gates that must open before the workload may preempt."
        )
        spec_rules = [
            (
                "!has(self.priorityClassRef) || has(self.priority)",
                "priority should not be nil when priorityClassRef is set",
            )
        ]
    spec = obj(
        spec_props, "Pod sets, queue and priority of the workload.", required=["podSets"], rules=spec_rules
    )

    pod_set_assignment = obj(
        {
            "name": {**name_ref(label=True), "default": "main"},
            "flavors": dict_of(name_ref(), "Flavor assigned to each resource."),
            "resourceUsage": resource_list("Total resources of all the pods of the pod set."),
            "count": integer("Pods counted at admission.", minimum=0),
            "topologyAssignment": topology_assignment(version),
            "delayedTopologyRequest": string(enum=["Pending", "Ready"], max_length=7),
        }
    )
    status_props: dict[str, Schema] = {
        "conditions": conditions("QuotaReserved, Admitted, Evicted, Requeued, PodsReady, Finished, ..."),
        "admission": obj(
            {
                "clusterQueue": name_ref("The ClusterQueue that admitted the workload."),
                "podSetAssignments": by_name(
                    pod_set_assignment, max_items=18
                ),
            },
            "Where the workload reserved quota; null again once released.",
            required=["clusterQueue", "podSetAssignments"],
        ),
        "requeueState": obj(
            {"count": integer(minimum=0), "requeueAt": date_time("When the workload is requeued.")}
        ),
        "reclaimablePods": by_name(
            obj({"name": name_ref(label=True), "count": integer(minimum=0)}, required=["name", "count"]),
            "Pods per pod set that no longer need their reservation.",
            max_items=18,
        ),
        "admissionChecks": by_name(
            admission_check_state(),
            "State of each AdmissionCheck the workload needs.",
            max_items=8,
        ),
        "resourceRequests": by_name(
            obj({"name": name_ref(label=True), "resources": resource_list()}, required=["name"]),
            "Resources the scheduler computed for a workload not yet admitted.",
            max_items=18,
        ),
        ("accumulatedPastExexcutionTimeSeconds" if v1 else "accumulatedPastExecutionTimeSeconds"): integer(
            "Seconds spent Admitted in previous admit/evict cycles."
        ),
        "schedulingStats": obj(
            {
                "evictions": arr(
                    obj(
                        {
                            "reason": string(max_length=316),
                            "underlyingCause": string(max_length=316),
                            "count": integer(minimum=0),
                        },
                        required=["reason", "underlyingCause", "count"],
                    ),
                    list_type="map",
                    map_keys=["reason", "underlyingCause"],
                    max_items=256,
                )
            }
        ),
        "nominatedClusterNames": arr(string(max_length=256), max_items=20),
        "clusterName": string("The MultiKueue worker the workload runs on.", max_length=256),
        "unhealthyNodes": by_name(
            obj({"name": string(max_length=63)}, required=["name"]),
            max_items=8,
        ),
    }
    if not v1:
        status_props["preemptionGates"] = preemption_gate("State of the preemption gates.")
    status = obj(
        status_props,
        rules=[
            (
                "!has(oldSelf.clusterName) || !has(self.clusterName) || "
                "oldSelf.clusterName == self.clusterName",
                "clusterName is immutable once set",
            ),
            (
                "!has(self.clusterName) || "
                "(!has(self.nominatedClusterNames) || size(self.nominatedClusterNames) == 0)",
                "clusterName and nominatedClusterNames are mutually exclusive",
            ),
        ],
    )

    qr_old, qr_new = _quota_reserved("oldSelf"), _quota_reserved("self")
    root_rules = [
        (
            f"{qr_new} && has(self.status.admission) ? "
            "size(self.spec.podSets) == size(self.status.admission.podSetAssignments) : true",
            "podSetAssignments must have the same number of podSets as the spec",
        ),
        (
            f"(({qr_old}) && ({qr_new}) && has(oldSelf.spec.queueName) && has(self.spec.queueName)) ? "
            "oldSelf.spec.queueName == self.spec.queueName : true",
            "queueName is immutable while workload quota reserved",
        ),
        (
            f"(({_admitted('oldSelf')}) && ({_admitted('self')})) ? "
            "((has(oldSelf.spec.maximumExecutionTimeSeconds) ? "
            "oldSelf.spec.maximumExecutionTimeSeconds : 0) == "
            "(has(self.spec.maximumExecutionTimeSeconds) ? "
            "self.spec.maximumExecutionTimeSeconds : 0)) : true",
            "maximumExecutionTimeSeconds is immutable while workload quota reserved",
        ),
    ]
    if v1:
        root_rules += [
            (
                f"({qr_old}) ? ((!has(oldSelf.spec.priorityClassSource) && "
                "!has(self.spec.priorityClassSource)) || "
                "(has(oldSelf.spec.priorityClassSource) && has(self.spec.priorityClassSource) && "
                "oldSelf.spec.priorityClassSource == self.spec.priorityClassSource)) : true",
                "priorityClassSource is immutable while workload quota reserved",
            ),
            (
                f"(({qr_old}) && has(oldSelf.spec.priorityClassSource) && "
                "oldSelf.spec.priorityClassSource == 'scheduling.k8s.io/priorityclass' && "
                "has(oldSelf.spec.priorityClassName) && has(self.spec.priorityClassName)) ? "
                "oldSelf.spec.priorityClassName == self.spec.priorityClassName : true",
                "priorityClassName is immutable for scheduling.k8s.io/priorityclass "
                "while workload quota reserved",
            ),
        ]
    else:
        ref_both = f"({qr_old}) && has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef)"
        root_rules += [
            (
                f"({qr_old}) ? ((!has(oldSelf.spec.priorityClassRef) && !has(self.spec.priorityClassRef)) || "
                "(has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef))) : true",
                "priorityClassRef is immutable while workload quota reserved",
            ),
            (
                f"({ref_both}) ? "
                "oldSelf.spec.priorityClassRef.group == self.spec.priorityClassRef.group : true",
                "priorityClassRef.group is immutable while workload quota reserved",
            ),
            (
                f"({ref_both}) ? "
                "oldSelf.spec.priorityClassRef.kind == self.spec.priorityClassRef.kind : true",
                "priorityClassRef.kind is immutable while workload quota reserved",
            ),
            (
                f"({ref_both} && self.spec.priorityClassRef.group == 'scheduling.k8s.io') ? "
                "oldSelf.spec.priorityClassRef.name == self.spec.priorityClassRef.name : true",
                "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass "
                "while workload quota reserved",
            ),
        ]
    return spec, status, root_rules


# --- WorkloadPriorityClass ---------------------------------------------------------------------


def workload_priority_class_root() -> dict[str, Schema]:
    return {
        "value": integer("Priority of the workloads that use this class; higher goes first."),
        "description": string("What the class is for.", max_length=2048),
    }


# --- AdmissionCheck ----------------------------------------------------------------------------


def admission_check(version: str) -> tuple[Schema | None, Schema | None, list[tuple[str, str]]]:
    controller = string(
        "The controller that owns this check, e.g. kueue.x-k8s.io/provisioning-request.",
        min_length=1,
        max_length=253,
        rules=[("self == oldSelf", "field is immutable")],
    )
    props: dict[str, Schema] = {
        "controllerName": controller,
        "parameters": obj(
            {
                "apiGroup": string(max_length=253, pattern=DNS1123_SUBDOMAIN),
                "kind": string(max_length=63, pattern=r"^[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?$"),
                "name": string(max_length=63, pattern=DNS1123_LABEL),
            },
            "The cluster-scoped object that configures this check.",
            required=["apiGroup", "kind", "name"],
        ),
    }
    if version == "v1beta1":
        props["retryDelayMinutes"] = integer("Deprecated, has no effect.", fmt="int64", default=15)
    return (
        obj(props, "The controller and parameters of the check.", required=["controllerName"]),
        obj({"conditions": conditions("Active, set by the check's controller.")}),
        [],
    )


# --- MultiKueue --------------------------------------------------------------------------------

EXACTLY_ONE_SOURCE = (
    "[has(self.kubeConfig), has(self.clusterProfileRef)].filter(x, x).size() == 1",
    "exactly one of the fields in [kubeConfig clusterProfileRef] must be set",
)


def multikueue_cluster(version: str) -> tuple[Schema | None, Schema | None, list[tuple[str, str]]]:
    sources: dict[str, Schema] = {
        "kubeConfig": obj(
            {
                "location": string(
                    "Name of a Secret in kadmit's namespace (key kubeconfig), or a file path.",
                    min_length=1,
                    max_length=256,
                ),
                "locationType": string(enum=["Secret", "Path"], default="Secret"),
            },
            "How to reach the worker cluster.",
            required=["location"],
        ),
        "clusterProfileRef": obj(
            {"name": string(min_length=1, max_length=256)},
            "A ClusterProfile in kadmit's namespace.",
            required=["name"],
        ),
    }
    if version == "v1beta1":
        spec = obj(sources, "The worker cluster.", rules=[EXACTLY_ONE_SOURCE])
    else:
        spec = obj(
            {
                "clusterSource": obj(
                    sources, "How to connect to the worker cluster.", rules=[EXACTLY_ONE_SOURCE]
                )
            },
            "The worker cluster.",
            required=["clusterSource"],
        )
    return spec, obj({"conditions": conditions("Active: whether the cluster is connected.")}), []


def multikueue_config(version: str) -> tuple[Schema | None, Schema | None, list[tuple[str, str]]]:
    props: dict[str, Schema] = {
        "clusters": arr(
            string(max_length=256),
            "MultiKueueClusters to dispatch to; the incremental dispatcher follows this order.",
            list_type="set",
            min_items=1,
            max_items=20,
        )
    }
    if version == "v1beta2":
        props["quotaManagement"] = string(enum=["Manual", "Automated"], default="Manual")
    return obj(props, required=["clusters"]), None, []


# --- ProvisioningRequestConfig -----------------------------------------------------------------


def provisioning_request_config(version: str) -> tuple[Schema | None, Schema | None, list[tuple[str, str]]]:
    retry_defaults = {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}
    spec = obj(
        {
            "provisioningClassName": string(
                "The ProvisioningRequest class, e.g. check-capacity.autoscaling.x-k8s.io.",
                min_length=1,
                max_length=253,
                pattern=DNS1123_SUBDOMAIN,
            ),
            "parameters": string_map(
                "Parameters passed to the ProvisioningRequest.", max_properties=100, max_value_length=255
            ),
            "managedResources": arr(
                string(),
                "Resources managed by the autoscaler; a workload without them skips the request.",
                list_type="set",
                max_items=100,
            ),
            "retryStrategy": obj(
                {
                    "backoffLimitCount": integer("Retries before the check is Rejected.", default=3),
                    "backoffBaseSeconds": integer("Base of the exponential backoff.", default=60),
                    "backoffMaxSeconds": integer("Longest backoff.", default=1800),
                },
                "How failed or expired requests are retried.",
                default=retry_defaults,
            ),
            "podSetUpdates": obj(
                {
                    "nodeSelector": arr(
                        obj(
                            {
                                "key": string(min_length=1, max_length=317, pattern=QUALIFIED_NAME),
                                "valueFromProvisioningClassDetail": string(min_length=1, max_length=32768),
                            },
                            required=["key", "valueFromProvisioningClassDetail"],
                        ),
                        list_type="map",
                        map_keys=["key"],
                        max_items=8,
                    )
                },
                "nodeSelector entries taken from the request's provisioningClassDetails.",
            ),
            "podSetMergePolicy": string(
                "How pod sets are merged into one request.",
                enum=["IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"],
            ),
        },
        "The ProvisioningRequest kadmit creates for this check.",
        required=["provisioningClassName"],
    )
    return spec, None, []


# --- Topology ----------------------------------------------------------------------------------


def topology(version: str) -> tuple[Schema | None, Schema | None, list[tuple[str, str]]]:
    level = obj(
        {
            "nodeLabel": string(
                "Node label key of this level.", min_length=1, max_length=316, pattern=QUALIFIED_NAME
            )
        },
        required=["nodeLabel"],
    )
    spec = obj(
        {
            "levels": arr(
                level,
                "Levels from the highest to the lowest.",
                min_items=1,
                max_items=16,
                rules=[
                    ("self == oldSelf", "field is immutable"),
                    ("size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0", "must be unique"),
                ],
            )
        },
        required=["levels"],
    )
    return spec, None, []


# --- The CRDs ----------------------------------------------------------------------------------

SchemaParts = Callable[[str], tuple[Schema | None, Schema | None, list[tuple[str, str]]]]


@dataclass(frozen=True)
class KindSpec:
    """Everything that makes one Kueue kind's CRD."""

    kind: str
    plural: str
    scope: str
    short_names: tuple[str, ...]
    description: str
    parts: SchemaParts | None
    status_subresource: bool = False
    conversion_webhook: bool = False
    columns: Callable[[str], list[PrinterColumn]] = field(default=lambda version: [])
    root_properties: Callable[[], dict[str, Schema]] | None = None
    root_required: tuple[str, ...] = ()


def _workload_counts(admitted_description: str, priority: int) -> list[PrinterColumn]:
    """The Pending / Admitted Workloads columns a ClusterQueue and a LocalQueue share (Kueue words
    the admitted description slightly differently for each)."""
    return [
        column("Pending Workloads", ".status.pendingWorkloads", "integer", "Number of pending workloads"),
        column("Admitted Workloads", ".status.admittedWorkloads", "integer", admitted_description, priority),
    ]


def _cq_columns(version: str) -> list[PrinterColumn]:
    cohort_path = ".spec.cohort" if version == "v1beta1" else ".spec.cohortName"
    return [
        column("Cohort", cohort_path, "string", "Cohort that this ClusterQueue belongs to"),
        column(
            "Strategy",
            ".spec.queueingStrategy",
            "string",
            "The queueing strategy used to prioritize workloads",
            1,
        ),
        *_workload_counts("Number of admitted workloads that haven't finished yet", priority=1),
    ]


def _lq_columns(version: str) -> list[PrinterColumn]:
    return [
        column("ClusterQueue", ".spec.clusterQueue", "string", "Backing ClusterQueue"),
        *_workload_counts("Number of admitted workloads that haven't finished yet.", priority=0),
    ]


def _wl_columns(version: str) -> list[PrinterColumn]:
    return [
        column("Queue", ".spec.queueName", "string", "Name of the queue this workload was submitted to"),
        column(
            "Reserved in",
            ".status.admission.clusterQueue",
            "string",
            "Name of the ClusterQueue where the workload is reserving quota",
        ),
        column("Admitted", ".status.conditions[?(@.type=='Admitted')].status", "string", "Admission status"),
        column("Finished", ".status.conditions[?(@.type=='Finished')].status", "string", "Workload finished"),
        column("Age", ".metadata.creationTimestamp", "date", "Time this workload was created"),
    ]


def _mkc_columns(version: str) -> list[PrinterColumn]:
    return [
        column(
            "Connected",
            ".status.conditions[?(@.type=='Active')].status",
            "string",
            "MultiKueueCluster is connected",
        ),
        AGE,
    ]


def _wpc_columns(version: str) -> list[PrinterColumn]:
    return [column("Value", ".value", "integer", "Value of workloadPriorityClass's Priority")]


KINDS: tuple[KindSpec, ...] = (
    KindSpec(
        "ResourceFlavor",
        "resourceflavors",
        "Cluster",
        ("flavor", "flavors", "rf"),
        "A kind of node (labels, taints, tolerations) that quota is counted against.",
        resource_flavor,
    ),
    KindSpec(
        "ClusterQueue",
        "clusterqueues",
        "Cluster",
        ("cq",),
        "A pool of quota, per flavor and resource, and the policies to share it.",
        cluster_queue,
        status_subresource=True,
        conversion_webhook=True,
        columns=_cq_columns,
    ),
    KindSpec(
        "LocalQueue",
        "localqueues",
        "Namespaced",
        ("queue", "queues", "lq"),
        "A namespace's entry point to a ClusterQueue.",
        local_queue,
        status_subresource=True,
        conversion_webhook=True,
        columns=_lq_columns,
    ),
    KindSpec(
        "Cohort",
        "cohorts",
        "Cluster",
        ("co",),
        "A group of ClusterQueues (and cohorts) that lend each other unused quota.",
        cohort,
        status_subresource=True,
        conversion_webhook=True,
    ),
    KindSpec(
        "Workload",
        "workloads",
        "Namespaced",
        ("kwl", "kueueworkload", "kueueworkloads"),
        "The unit of admission: the pod sets of one job, its queue and its admission state.",
        workload,
        status_subresource=True,
        conversion_webhook=True,
        columns=_wl_columns,
    ),
    KindSpec(
        "WorkloadPriorityClass",
        "workloadpriorityclasses",
        "Cluster",
        ("wpc",),
        "A priority for workloads, independent of pod priority.",
        None,
        columns=_wpc_columns,
        root_properties=workload_priority_class_root,
        root_required=("value",),
    ),
    KindSpec(
        "AdmissionCheck",
        "admissionchecks",
        "Cluster",
        ("ac",),
        "A check a workload must pass, after reserving quota, before it is admitted.",
        admission_check,
        status_subresource=True,
    ),
    KindSpec(
        "MultiKueueCluster",
        "multikueueclusters",
        "Cluster",
        ("mkc",),
        "A worker cluster that MultiKueue dispatches workloads to.",
        multikueue_cluster,
        status_subresource=True,
        conversion_webhook=True,
        columns=_mkc_columns,
    ),
    KindSpec(
        "MultiKueueConfig",
        "multikueueconfigs",
        "Cluster",
        ("mkconf",),
        "The worker clusters of a MultiKueue AdmissionCheck.",
        multikueue_config,
    ),
    KindSpec(
        "ProvisioningRequestConfig",
        "provisioningrequestconfigs",
        "Cluster",
        ("prc",),
        "Parameters of a ProvisioningRequest AdmissionCheck.",
        provisioning_request_config,
    ),
    KindSpec(
        "Topology",
        "topologies",
        "Cluster",
        ("topo",),
        "The levels of the node topology used by Topology Aware Scheduling.",
        topology,
    ),
)


def root_schema(kind: KindSpec, version: str) -> Schema:
    props: dict[str, Schema] = {
        "apiVersion": string("Versioned schema of this representation of an object."),
        "kind": string("REST resource this object represents."),
        "metadata": {"type": "object"},
    }
    rules: list[tuple[str, str]] = []
    if kind.parts is not None:
        spec, status, rules = kind.parts(version)
        if spec is not None:
            props["spec"] = spec
        if status is not None:
            props["status"] = status
    if kind.root_properties is not None:
        props.update(kind.root_properties())
    return obj(
        props,
        f"{kind.kind} is {kind.description[0].lower()}{kind.description[1:]}",
        required=kind.root_required,
        rules=rules,
    )


def crd(kind: KindSpec, *, webhook_service: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """The CustomResourceDefinition of ``kind``, both versions, v1beta2 stored."""
    versions = []
    for version in VERSIONS:
        entry: dict[str, Any] = {"name": version, "served": True, "storage": version == "v1beta2"}
        if version == "v1beta1":
            entry["deprecated"] = True
            entry["deprecationWarning"] = DEPRECATION_WARNING
        columns = kind.columns(version)
        if columns:
            entry["additionalPrinterColumns"] = columns
        entry["schema"] = {"openAPIV3Schema": root_schema(kind, version)}
        if kind.status_subresource:
            entry["subresources"] = {"status": {}}
        versions.append(entry)
    spec: dict[str, Any] = {
        "group": GROUP,
        "names": {
            "categories": ["kueue"],
            "kind": kind.kind,
            "listKind": f"{kind.kind}List",
            "plural": kind.plural,
            "shortNames": list(kind.short_names),
            "singular": kind.kind.lower(),
        },
        "scope": kind.scope,
    }
    if kind.conversion_webhook:
        spec["conversion"] = {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"service": {**webhook_service, "path": "/convert"}},
                "conversionReviewVersions": ["v1"],
            },
        }
    spec["versions"] = versions
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{GROUP}", "labels": dict(labels)},
        "spec": spec,
    }
