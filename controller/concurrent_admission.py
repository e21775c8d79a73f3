"""Kueue's concurrent-admission controller (``pkg/controller/concurrentadmission``), on with the
ConcurrentAdmission feature gate.

A Workload sent to a ClusterQueue with ``spec.concurrentAdmissionPolicy`` is a *parent*: it is
labelled ``kueue.x-k8s.io/concurrent-admission-parent: "true"`` and gets one *variant* per flavor
of the queue's resource group, a copy it owns that may only take that flavor. The engine schedules
the variants (:mod:`kadmit.engine.concurrent_admission`); this loop, keyed by the parent, keeps the
family in step with what was decided, level-triggered, in Kueue's order:

1. create the missing variants, delete those whose flavor left the queue;
2. a variant evicted while holding quota evicts the parent (``VariantEvicted``) and, once the
   parent has given its quota back (its job stopped), loses its own reservation;
3. deactivate the variants that may no longer win (all but the admitted one under
   ``RetainFirstAdmission``; under ``TryPreferredFlavors`` those after the admitted one's flavor
   or after ``lastAcceptableFlavorName``) and activate those that still may;
4. the parent takes the admitted variant's admission (its job then starts on that flavor), is
   evicted when no variant is admitted any more, and finishes its variants when it finishes.

5. variants carry Kueue's preemption gate ``kueue.x-k8s.io/concurrent-admission``: one variant of
   a family at a time may preempt, the first in flavor order that is blocked on its gate, for
   :data:`PREEMPTION_TIMEOUT` before the next one's gate opens.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kadmit import workload as ws
from kadmit.controller.jobs.construct import KUEUE as KUEUE_GROUP
from kadmit.controller.jobs.construct import MAX_PREFIX_LENGTH
from kadmit.engine.concurrent_admission import (
    ALLOWED_FLAVORS_ANNOTATION,
    PARENT_LABEL,
    PREEMPTION_GATE,
    RETAIN_FIRST_ADMISSION,
    TRY_PREFERRED_FLAVORS,
    read_variant,
)
from kadmit.engine.decisions import condition
from kadmit.kube import Client, Obj
from kadmit.kube.errors import AlreadyExists, NotFound
from kadmit.kube.events import NORMAL, EventRecorder
from kadmit.kube.informer import Informer
from kadmit.kube.objects import copy_object
from kadmit.kube.resources import WORKLOADS
from kadmit.kube.workers import Key, KeyedReconciler
from kadmit.kube.writes import update_status, update_unless_gone

logger = logging.getLogger(__name__)

VARIANT_API_VERSION = "kueue.x-k8s.io/v1beta2"
CREATED_VARIANT = "CreatedVariant"
DELETED_VARIANT = "DeletedVariant"
ACTIVATED_VARIANT = "ActivatedVariant"
DEACTIVATED_VARIANT = "DeactivatedVariant"
PREEMPTION_UNGATED_VARIANT = "PreemptionUngatedVariant"
PREEMPTION_TIMEOUT = 300.0
"""Kueue's ``preemptionTimeout``: a variant's open gate is its family's only one this long."""


def gate_to_open(variants: list[Obj], now: float) -> tuple[Obj | None, float | None]:
    """Kueue's ``selectVariantToOpenPreemptionGate`` over ``variants`` in flavor order: the first
    admissible variant (active, unfinished, not reserving) blocked on its closed gate, unless a
    variant not evaluated yet comes first; it is opened when no admissible variant's gate opened
    in the last :data:`PREEMPTION_TIMEOUT` seconds. Returns the variant to open (or None) and
    when to look again (seconds, or None)."""
    admissible = [
        v
        for v in variants
        if _active(v)
        and not ws.is_true(v, ws.FINISHED)
        and not ws.is_true(v, ws.QUOTA_RESERVED)
        and not ws.is_on_hold(v)
    ]
    candidate = None
    for variant in admissible:
        state = ws.gate_state(variant, PREEMPTION_GATE)
        if state is not None and state.get("position") == ws.GATE_OPEN:
            continue
        if not ws.is_true(variant, ws.BLOCKED_ON_PREEMPTION_GATES):
            if ws.find_condition(variant, ws.QUOTA_RESERVED) is None:
                return None, None  # not evaluated for admission yet
            continue  # it needs no preemption
        candidate = variant
        break
    if candidate is None:
        return None, None
    opened = [
        ws.parse_time(state.get("lastTransitionTime")) or 0.0
        for v in admissible
        if (state := ws.gate_state(v, PREEMPTION_GATE)) is not None and state.get("position") == ws.GATE_OPEN
    ]
    if not opened:
        return candidate, PREEMPTION_TIMEOUT
    wait = PREEMPTION_TIMEOUT - (now - max(opened))
    if wait > 0:
        return None, wait
    return candidate, PREEMPTION_TIMEOUT


def variant_name(parent_name: str, parent_uid: str, flavor: str) -> str:
    """Kueue's ``GetWorkloadNameForVariant``: the parent's name without its hash suffix,
    ``-variant-<flavor>``, and a hash of the parent (as a Workload), its uid and the flavor."""
    base = parent_name[: parent_name.rindex("-")] if "-" in parent_name else parent_name
    prefix = f"{base}-variant-{flavor}"[:MAX_PREFIX_LENGTH]
    hashed = f"Workload\n{KUEUE_GROUP}\n{parent_name}\n{parent_uid}\n{flavor}".encode()
    return f"{prefix}-{hashlib.sha1(hashed, usedforsecurity=False).hexdigest()[:5]}"


def make_variant(parent: Obj, flavor: str) -> Obj:
    """Kueue's ``generateVariant``: the parent's labels (but the parent label), annotations
    (plus the allowed flavor) and spec, owned by the parent."""
    meta = parent["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != PARENT_LABEL}
    annotations = {**(meta.get("annotations") or {}), ALLOWED_FLAVORS_ANNOTATION: flavor}
    spec = copy_object(parent.get("spec") or {})
    gates = list(spec.get("preemptionGates") or [])
    if not any(g.get("name") == PREEMPTION_GATE for g in gates):
        gates.append({"name": PREEMPTION_GATE})  # one variant of a family preempts at a time
    spec["preemptionGates"] = gates
    return {
        "apiVersion": VARIANT_API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": variant_name(meta["name"], str(meta.get("uid", "")), flavor),
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": VARIANT_API_VERSION,
                    "kind": "Workload",
                    "name": meta["name"],
                    "uid": meta.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def _keep(variant: Obj, written: Obj) -> None:
    """``variant`` (this reconcile's copy) becomes what was written."""
    variant.clear()
    variant.update(written)


def _flavor_of(variant: Obj) -> str:
    allowed = read_variant(variant["metadata"])[2]
    return allowed[0] if allowed else ""


@dataclass(frozen=True, slots=True)
class _Migration:
    """A ClusterQueue's ``concurrentAdmissionPolicy.migration``, with its flavors' order."""

    mode: str
    last_acceptable: str | None
    order: dict[str, int]

    def rank(self, flavor: str) -> int:
        """The flavor's place in the ClusterQueue (lower is preferred; unknown ones last)."""
        return self.order.get(flavor, len(self.order))


def _ref(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}"


def _active(obj: Obj) -> bool:
    return (obj.get("spec") or {}).get("active", True) is not False


class ConcurrentAdmissionReconciler(KeyedReconciler):
    """One reconcile per parent Workload; a variant's events queue its parent."""

    what = "ConcurrentAdmission"

    def __init__(
        self,
        kube: Client,
        workloads: Informer,
        local_queues: Informer,
        cluster_queues: Informer,
        events: EventRecorder,
        *,
        clock: Callable[[], float] = time.time,
        workers: int = 2,
    ) -> None:
        super().__init__(workers)
        self.kube = kube
        self.workloads = self.watch(workloads, self._on_workload)
        self.local_queues = local_queues
        self.cluster_queues = self.watch(cluster_queues, self._on_cluster_queue)
        self.events = events
        self.clock = clock

    # -- what to look at

    def _on_workload(self, event: str, wl: Obj, old: Obj | None) -> None:
        meta = wl["metadata"]
        parent_name = read_variant(meta)[0]
        if parent_name:
            self.queue.add((str(meta.get("namespace", "")), parent_name))
        elif event != "DELETED":
            self.queue.add((str(meta.get("namespace", "")), str(meta["name"])))

    def _on_cluster_queue(self, event: str, cq: Obj, old: Obj | None) -> None:
        """Its flavors may have changed: look at the parents sent to it (Kueue looks on updates
        that change the flavors' names; a queue made after its workloads is looked at too)."""
        if (cq.get("spec") or {}).get("concurrentAdmissionPolicy") is None:
            return
        name = cq["metadata"]["name"]
        for wl in self.workloads.list():
            if not read_variant(wl["metadata"])[0] and self._cluster_queue_name(wl) == name:
                self.queue.add((str(wl["metadata"].get("namespace", "")), str(wl["metadata"]["name"])))

    def initial_keys(self) -> list[Key]:
        return [
            (str(wl["metadata"].get("namespace", "")), str(wl["metadata"]["name"]))
            for wl in self.workloads.list()
            if not read_variant(wl["metadata"])[0]
        ]

    def _cluster_queue_name(self, wl: Obj) -> str | None:
        admission = (wl.get("status") or {}).get("admission") or {}
        if admission.get("clusterQueue"):
            return str(admission["clusterQueue"])
        queue_name = (wl.get("spec") or {}).get("queueName")
        lq = self.local_queues.get(wl["metadata"].get("namespace"), str(queue_name)) if queue_name else None
        return str((lq.get("spec") or {}).get("clusterQueue") or "") or None if lq is not None else None

    # -- the reconcile

    async def reconcile(self, namespace: str, name: str) -> None:
        parent = self.workloads.get(namespace, name)
        if parent is None or read_variant(parent["metadata"])[0]:
            return
        cq_name = self._cluster_queue_name(parent)
        cq = self.cluster_queues.get(None, cq_name) if cq_name else None
        policy = (cq.get("spec") or {}).get("concurrentAdmissionPolicy") if cq is not None else None
        if cq is None or policy is None:
            return
        if (parent["metadata"].get("labels") or {}).get(PARENT_LABEL) != "true":
            await self._label_parent(parent)  # its update event brings us back
            return
        groups = (cq.get("spec") or {}).get("resourceGroups") or []
        flavors = [str(f.get("name")) for f in (groups[0].get("flavors") or [])] if groups else []
        order = {flavor: index for index, flavor in enumerate(flavors)}
        migration = policy.get("migration") or {}
        plan = _Migration(migration.get("mode") or TRY_PREFERRED_FLAVORS,
                          (migration.get("constraints") or {}).get("lastAcceptableFlavorName"), order)
        uid = str(parent["metadata"].get("uid", ""))
        # copies: what this reconcile writes is kept in them, as Kueue's in-place patches are, so
        # that later steps see the family as it now is
        variants = [
            copy_object(v) for v in self.workloads.list(namespace) if read_variant(v["metadata"])[1] == uid
        ]
        variants.sort(key=lambda v: plan.rank(_flavor_of(v)))

        if not ws.is_true(parent, ws.FINISHED):
            await self._create_variants(parent, variants, flavors)
        variants = await self._delete_stale(parent, variants, order)
        if await self._sync_evictions(parent, variants):
            return
        # Kueue's IsAdmitted: the Admitted condition (an evicted variant counts until it gives
        # its quota back)
        admitted = next((v for v in variants if ws.is_true(v, ws.ADMITTED)), None)
        await self._sync_active(parent, variants, admitted, plan)
        await self._sync_admission(parent, variants, admitted)
        candidate, again = gate_to_open(variants, self.clock())
        if candidate is not None:
            await self._open_gate(candidate)
        if again is not None:
            self.queue.add_after((namespace, name), again)

    async def _open_gate(self, variant: Obj) -> None:
        now = self.clock()
        spec = variant.get("spec") or {}
        with contextlib.suppress(NotFound):
            written = await update_status(
                self.kube,
                WORKLOADS,
                variant,
                lambda s: ws.open_preemption_gate(spec, s, PREEMPTION_GATE, now),
            )
            if written is not None:
                _keep(variant, written)
                self.events.emit(
                    written,
                    NORMAL,
                    PREEMPTION_UNGATED_VARIANT,
                    f'Opened preemption gate for variant workload "{_ref(variant)}"',
                )

    async def _label_parent(self, parent: Obj) -> None:
        def label(obj: Obj) -> bool:
            labels = obj["metadata"].setdefault("labels", {})
            if labels.get(PARENT_LABEL) == "true":
                return False
            labels[PARENT_LABEL] = "true"
            return True

        await update_unless_gone(self.kube, WORKLOADS, parent, label)

    async def _create_variants(self, parent: Obj, variants: list[Obj], flavors: list[str]) -> None:
        have = {_flavor_of(v) for v in variants}
        for flavor in flavors:
            if flavor in have:
                continue
            variant = make_variant(parent, flavor)
            try:
                await self.kube.create(WORKLOADS, variant)
            except AlreadyExists:
                continue
            self.events.emit(parent, NORMAL, CREATED_VARIANT, f'Variant Workload "{_ref(variant)}" created')

    async def _delete_stale(self, parent: Obj, variants: list[Obj], order: dict[str, int]) -> list[Obj]:
        fresh = []
        for variant in variants:
            flavor = _flavor_of(variant)
            if flavor in order:
                fresh.append(variant)
                continue
            meta = variant["metadata"]
            await self.kube.delete(WORKLOADS, meta.get("namespace"), meta["name"], missing_ok=True)
            self.events.emit(
                parent,
                NORMAL,
                DELETED_VARIANT,
                f'Variant Workload "{_ref(variant)}" deleted; flavor "{flavor}" no longer in ClusterQueue',
            )
        return fresh

    async def _sync_evictions(self, parent: Obj, variants: list[Obj]) -> bool:
        """Kueue's ``syncVariantEvictionStatus``; True: stop here (wait for the parent to give its
        quota back, or for the variant's cleared reservation to reach the cache)."""
        for variant in variants:
            evicted = ws.find_condition(variant, ws.EVICTED)
            if (
                evicted is None
                or evicted.get("status") != "True"
                or not ws.is_true(variant, ws.QUOTA_RESERVED)
            ):
                continue
            if ws.is_true(parent, ws.QUOTA_RESERVED):
                if not ws.is_true(parent, ws.EVICTED):
                    await self._evict(parent, "VariantEvicted", "Admitted variant was evicted")
                return True
            await self._clear_admission(variant, evicted)
            return True  # the variant's update brings us back, with the family as it is then
        return False

    async def _evict(self, parent: Obj, reason: str, message: str) -> None:
        """The parent's job is stopped by its reconciler, which then gives the quota back."""
        now = self.clock()
        with contextlib.suppress(NotFound):
            await update_status(self.kube, WORKLOADS, parent, lambda s: ws.evict(s, reason, message, now))

    async def _clear_admission(self, variant: Obj, evicted: Obj) -> None:
        """Kueue's ``clearWorkloadAdmission``: a variant has no job to stop, so its quota is given
        back here (``Requeued`` as Kueue sets it after a preemption or a node failure)."""
        reason = str(evicted.get("reason", ""))
        message = str(evicted.get("message", ""))
        requeued = reason in ("Preempted", "NodeFailures")
        now = self.clock()
        with contextlib.suppress(NotFound):
            written = await update_status(
                self.kube,
                WORKLOADS,
                variant,
                lambda s: ws.clear_reservation(s, now, requeued, reason, message),
            )
            if written is not None:
                _keep(variant, written)

    async def _sync_active(
        self,
        parent: Obj,
        variants: list[Obj],
        admitted: Obj | None,
        migration: _Migration,
    ) -> None:
        """Kueue's pass over ``spec.active``: first the Variants to deactivate, then those to activate."""
        if not _active(parent):
            message = f'Parent Workload "{_ref(parent)}" not active'
            for variant in variants:
                await self._deactivate_variant(variant, message)
            return
        if admitted is None:
            for variant in variants:  # nothing admitted (a preemption, say): every flavor again
                await self._set_active(variant, True, "no other Variant being admitted")
            return
        name = admitted["metadata"]["name"]
        if migration.mode == RETAIN_FIRST_ADMISSION:
            for variant in variants:
                if variant["metadata"]["name"] != name:
                    message = f'RetainFirstAdmission: another Variant "{_ref(admitted)}" is admitted'
                    await self._deactivate_variant(variant, message)
            return
        rank = migration.rank(_flavor_of(admitted))
        last_acceptable = migration.last_acceptable
        if last_acceptable is not None:
            limit = migration.rank(last_acceptable)
            message = (
                f'being below lastAcceptableFlavor: "{last_acceptable}" and another Variant admitted '
                f'"{_ref(admitted)}"'
            )
            for variant in variants:
                if variant["metadata"]["name"] != name and migration.rank(_flavor_of(variant)) > limit:
                    await self._deactivate_variant(variant, message)
        message = f'being lower priority than admitted Variant "{_ref(admitted)}"'
        for variant in variants:
            if migration.rank(_flavor_of(variant)) > rank:
                await self._deactivate_variant(variant, message)
        for variant in variants:
            mine = migration.rank(_flavor_of(variant))
            if last_acceptable is not None:
                if mine <= migration.rank(last_acceptable) and mine < rank:
                    await self._set_active(
                        variant,
                        True,
                        f'being at least lastAcceptableFlavor: "{last_acceptable}" and higher priority than '
                        f'admitted Variant "{_ref(admitted)}"',
                    )
            elif mine < rank:
                await self._set_active(
                    variant, True, f'being higher priority than admitted Variant "{_ref(admitted)}"'
                )

    async def _deactivate_variant(self, variant: Obj, message: str) -> None:
        """Kueue's ``deactivateVariant``: inactive, and its quota given back once it is evicted."""
        await self._set_active(variant, False, message)  # kept in ``variant``
        evicted = ws.find_condition(variant, ws.EVICTED)
        if evicted is not None and evicted.get("status") == "True" and ws.is_true(variant, ws.QUOTA_RESERVED):
            await self._clear_admission(variant, evicted)

    async def _set_active(self, variant: Obj, active: bool, message: str) -> Obj | None:
        if _active(variant) == active:
            return None

        def flip(obj: Obj) -> bool:
            if _active(obj) == active:
                return False
            obj.setdefault("spec", {})["active"] = active
            return True

        written = await update_unless_gone(self.kube, WORKLOADS, variant, flip)
        if written is not None:
            _keep(variant, written)
            if active:
                self.events.emit(
                    written, NORMAL, ACTIVATED_VARIANT, f"Variant Workload activated due to {message}"
                )
            else:
                self.events.emit(
                    written, NORMAL, DEACTIVATED_VARIANT, f"Variant Workload deactivated due to {message}"
                )
        return written

    async def _sync_admission(self, parent: Obj, variants: list[Obj], admitted: Obj | None) -> None:
        """Kueue's ``syncAdmissionStatus``."""
        now = self.clock()
        if ws.is_true(parent, ws.FINISHED):
            finished = ws.find_condition(parent, ws.FINISHED) or {}
            reason, message = str(finished.get("reason", "")), str(finished.get("message", ""))
            for variant in variants:
                if not ws.is_true(variant, ws.FINISHED):
                    with contextlib.suppress(NotFound):
                        await update_status(
                            self.kube, WORKLOADS, variant, lambda s: ws.finish(s, reason, message, now)
                        )
            return
        parent_admitted = ws.is_true(parent, ws.ADMITTED)
        if admitted is None:
            if parent_admitted and not ws.is_true(parent, ws.EVICTED):
                await self._evict(parent, "ConcurrentAdmission", "No variant is running")
            return
        await self._sync_pods_ready(parent, admitted, now)
        if parent_admitted:
            return
        admission = copy_object((admitted.get("status") or {}).get("admission") or {})
        variant_name_ = admitted["metadata"]["name"]

        def admit(status: Obj) -> bool:
            if ws.is_true(status, ws.ADMITTED) or ws.is_true(status, ws.FINISHED):
                return False
            cq = admission.get("clusterQueue", "")
            conditions = [
                condition(
                    ws.QUOTA_RESERVED, "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", now
                ),
                condition(ws.ADMITTED, "True", "Admitted", f"The variant {variant_name_} is admitted", now),
            ]
            for kind in (ws.EVICTED, ws.PREEMPTED):  # Kueue's SetQuotaReservation resets them
                previous = ws.find_condition(status, kind)
                if previous is not None and previous.get("status") == "True":
                    message = f"Previously: {previous.get('message', '')}"
                    conditions.append(condition(kind, "False", "QuotaReserved", message, now))
            return ws.reserve(status, admission, conditions, [], now)

        with contextlib.suppress(NotFound):
            await update_status(self.kube, WORKLOADS, parent, admit)

    async def _sync_pods_ready(self, parent: Obj, variant: Obj, now: float) -> None:
        """The admitted variant carries its parent's ``PodsReady`` (the parent's job has the pods)."""
        ready = ws.find_condition(parent, ws.PODS_READY)
        if ready is None:
            return
        mine = ws.find_condition(variant, ws.PODS_READY)
        if (
            mine is not None
            and mine.get("status") == ready.get("status")
            and mine.get("reason") == ready.get("reason")
        ):
            return

        def sync(status: Obj) -> bool:
            return ws.apply_conditions(status, [copy_object(ready)], now)

        with contextlib.suppress(NotFound):
            await update_status(self.kube, WORKLOADS, variant, sync)
