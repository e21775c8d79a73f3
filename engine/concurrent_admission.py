"""Kueue's ConcurrentAdmission (alpha, feature gate ``ConcurrentAdmission``) as the engine sees it.

A ClusterQueue with ``spec.concurrentAdmissionPolicy`` does not schedule the Workloads sent to
it directly: each such Workload becomes a *parent* (label
``kueue.x-k8s.io/concurrent-admission-parent: "true"``) and the controller makes one *variant*
per flavor of the queue's single resource group: a copy owned by the parent (an owner reference
of kind Workload) that may only take the flavors its annotation
``kueue.x-k8s.io/workload-allowed-resource-flavors`` lists. The engine

* never queues a parent nor charges its admission (the admitted variant holds the quota);
* assigns a variant only its allowed flavors;
* skips a variant while a sibling on a more preferred flavor (earlier in the queue's flavor
  list) is Admitted: "A more favorable variant is already admitted";
* when a variant fits while a sibling on a less preferred flavor is Admitted, evicts that sibling
  (``Evicted`` reason ``FlavorMigration``) and waits for it, unless the policy's
  ``migration.constraints.lastAcceptableFlavorName`` ranks the variant's flavor below it.

Kueue: ``pkg/workload/concurrentadmission``, ``pkg/scheduler/scheduler.go``
(``findAdmittedSibling``, ``isMigrationAllowed``, ``issueMigration``),
``pkg/scheduler/flavorassigner`` (``IsFlavorAllowedForVariant``), ``pkg/cache``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeVar

from kadmit.engine.model import ClusterQueue, ConcurrentAdmissionPolicy, Workload

PARENT_LABEL = "kueue.x-k8s.io/concurrent-admission-parent"
"""On a parent Workload, ``"true"``."""
ALLOWED_FLAVORS_ANNOTATION = "kueue.x-k8s.io/workload-allowed-resource-flavors"
"""On a variant: the flavors it may be assigned, comma-separated (one: the variant's flavor)."""
PREEMPTION_GATE = "kueue.x-k8s.io/concurrent-admission"
"""Kueue's preemption gate on variants (not honoured by kadmit: see docs/engine.md)."""
TRY_PREFERRED_FLAVORS = "TryPreferredFlavors"
RETAIN_FIRST_ADMISSION = "RetainFirstAdmission"
MIGRATION_MODES = (TRY_PREFERRED_FLAVORS, RETAIN_FIRST_ADMISSION)
FLAVOR_MIGRATION = "FlavorMigration"
"""``Evicted`` reason of an admitted variant whose sibling on a preferred flavor fits."""
MORE_FAVORABLE_ADMITTED = "A more favorable variant is already admitted"
BELOW_LAST_ACCEPTABLE = "Target flavor is below LastAcceptableFlavorName"
PENDING_MIGRATION = ". Pending the migration of 1 workload(s)"
"""The migrating variant's pending message (Kueue's, with its empty inadmissible message first)."""
_API_GROUP = "kueue.x-k8s.io/"


def migration_message(uid: str) -> str:
    """The ``Evicted`` message of the variant that makes way (Kueue's ``issueMigration``)."""
    return (
        f"Evicted to accommodate a workload (UID: {uid}) due to migration to more favorable resource flavor"
    )


ADMISSION_GATED = "AdmissionGated"
"""QuotaReserved reason of a workload that needs to preempt behind a closed preemption gate."""
BLOCKED_ON_PREEMPTION_GATES = "BlockedOnPreemptionGates"
PREEMPTION_GATED = "PreemptionGated"
GATED_MESSAGE = "Workload requires preemption, but it's gated"


def has_closed_preemption_gate(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Kueue's ``HasClosedPreemptionGate``: a gate of ``spec.preemptionGates`` whose state in
    ``status.preemptionGates`` is not Open (a gate only in the spec is closed)."""
    gates = spec.get("preemptionGates") or ()
    if not gates:
        return False
    positions = {
        str(state.get("name")): state.get("position")
        for state in status.get("preemptionGates") or ()
        if isinstance(state, Mapping)
    }
    return any(isinstance(gate, Mapping) and positions.get(str(gate.get("name"))) != "Open" for gate in gates)


def parse_csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def read_variant(meta: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...] | None, bool]:
    """From a Workload's ``metadata``: its parent's name and uid (an owner reference of kind
    Workload; empty: not a variant), its allowed flavors (None: no annotation) and whether it
    carries the parent label."""
    parent_name = parent_uid = ""
    for ref in meta.get("ownerReferences") or ():
        if not isinstance(ref, Mapping):
            continue
        if ref.get("kind") == "Workload" and str(ref.get("apiVersion", "")).startswith(_API_GROUP):
            parent_name, parent_uid = str(ref.get("name", "")), str(ref.get("uid", ""))
            break
    annotations = meta.get("annotations") or {}
    raw = annotations.get(ALLOWED_FLAVORS_ANNOTATION) if isinstance(annotations, Mapping) else None
    allowed = parse_csv(raw) if isinstance(raw, str) else None
    labels = meta.get("labels") or {}
    is_parent = isinstance(labels, Mapping) and labels.get(PARENT_LABEL) == "true"
    return parent_name, parent_uid, allowed, is_parent


def flavor_order(cq: ClusterQueue) -> tuple[str, ...]:
    """The queue's flavors, most preferred first (its first resource group: the policy requires
    exactly one)."""
    if not cq.resource_groups:
        return ()
    return tuple(f.name for f in cq.resource_groups[0].flavors)


def _index(flavors: tuple[str, ...], wl: Workload) -> int | None:
    """Kueue's ``resolveFlavorIndex``: where the variant's flavor (its first allowed one) ranks."""
    if not wl.allowed_flavors:
        return None
    try:
        return flavors.index(wl.allowed_flavors[0])
    except ValueError:
        return None


class Sibling(Protocol):
    """What the engine keeps of a workload holding quota (an ``Entry``)."""

    @property
    def wl(self) -> Workload: ...

    @property
    def admitted(self) -> bool: ...


S = TypeVar("S", bound=Sibling)


def admitted_sibling(
    wl: Workload, cq: ClusterQueue, holders: Iterable[S], *, more_favorable: bool
) -> S | None:
    """An Admitted sibling of variant ``wl`` among ``holders`` (the workloads reserving in
    ``cq``) whose flavor ranks before ``wl``'s (``more_favorable``) or after it (Kueue's
    ``findAdmittedMoreFavorableSibling`` / ``findAdmittedLessFavorableSibling``)."""
    if not wl.parent_uid:
        return None
    flavors = flavor_order(cq)
    mine = _index(flavors, wl)
    if mine is None:
        return None
    for holder in holders:
        other = holder.wl
        if other.uid == wl.uid or other.parent_uid != wl.parent_uid or not holder.admitted:
            continue
        theirs = _index(flavors, other)
        if theirs is None:
            continue
        if (theirs < mine) if more_favorable else (theirs > mine):
            return holder
    return None


def migration_allowed(wl: Workload, cq: ClusterQueue) -> bool:
    """Kueue's ``isMigrationAllowed``: the variant's flavor ranks at or before the policy's
    ``lastAcceptableFlavorName`` (always, without one)."""
    policy: ConcurrentAdmissionPolicy | None = cq.concurrent_admission
    if policy is None or policy.last_acceptable_flavor is None:
        return True
    flavors = flavor_order(cq)
    mine = _index(flavors, wl)
    if mine is None:
        return False
    try:
        return mine <= flavors.index(policy.last_acceptable_flavor)
    except ValueError:
        return True  # the webhook refuses a name that is not one of the queue's flavors
