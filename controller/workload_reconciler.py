"""The Workload's own lifecycle, independent of its job's kind (Kueue's workload controller, §2.3, §5.7).

Deactivation and reactivation, the WaitForPodsReady timeout with its requeue backoff, and the
release of Workloads whose owner is gone. Timers are delayed queue entries: a Workload whose
pods have until ``t`` to get ready is looked at again at ``t``, not polled.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from kadmit import workload as ws
from kadmit.controller.config import WaitForPodsReady
from kadmit.controller.jobs.construct import FINALIZER, JOB_UID_LABEL
from kadmit.engine.concurrent_admission import PARENT_LABEL, read_variant
from kadmit.kube import ApiError, Client, NotFound, Obj
from kadmit.kube.informer import Informer
from kadmit.kube.resources import WORKLOADS
from kadmit.kube.workers import Key, KeyedReconciler
from kadmit.kube.writes import update, update_status, update_unless_gone, without_finalizer
from kadmit.workload import applicable_checks

logger = logging.getLogger(__name__)

OwnerExists = Callable[[Obj], bool]


WORKERS = 2
"""Workloads worked on at once, unless ``controller.groupKindConcurrency`` says."""


class WorkloadReconciler(KeyedReconciler):
    what = "Workload"

    def __init__(
        self,
        kube: Client,
        workloads: Informer,
        owner_exists: OwnerExists,
        wait_for_pods_ready: WaitForPodsReady | None,
        *,
        clock: Callable[[], float] = time.time,
        on_requeue_at: Callable[[float], None] | None = None,
        on_evicted: Callable[[Obj, str, str], None] | None = None,
        cluster_queues: Informer | None = None,
        delete_finished_after: float | None = None,
        workers: int = WORKERS,
    ) -> None:
        super().__init__(workers)
        self.kube = kube
        self.workloads = self.watch(workloads, self._on_workload)
        self.owner_exists = owner_exists
        self.wait_for_pods_ready = wait_for_pods_ready
        self.clock = clock
        self.on_requeue_at = on_requeue_at
        self.on_evicted = on_evicted
        self.cluster_queues = cluster_queues
        self.delete_finished_after = delete_finished_after
        if cluster_queues is not None:
            self.watch(cluster_queues, self._on_cluster_queue)

    def _on_cluster_queue(self, event: str, cq: Obj, old: Obj | None) -> None:
        """Its admission checks may have changed: look at the Workloads reserving quota in it."""
        if old is not None and (old.get("spec") or {}) == (cq.get("spec") or {}):
            return
        name = cq["metadata"]["name"]
        for wl in self.workloads.list():
            if ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") == name:
                self._on_workload("MODIFIED", wl, None)

    def _on_workload(self, event: str, workload: Obj, old: Obj | None) -> None:
        if event != "DELETED":
            meta = workload["metadata"]
            self.queue.add((meta.get("namespace", ""), meta["name"]))

    def initial_keys(self) -> list[Key]:
        return [_key(wl) for wl in self.workloads.list()]

    async def reconcile(self, namespace: str, name: str) -> None:
        wl = self.workloads.get(namespace, name)
        if wl is None:
            return
        now = self.clock()
        meta = wl["metadata"]
        # A Workload whose job is gone: finished (OwnerNotFound) and let go.
        orphaned = (meta.get("deletionTimestamp") or JOB_UID_LABEL in (meta.get("labels") or {})) and \
            not self.owner_exists(wl)
        if orphaned and FINALIZER in (meta.get("finalizers") or []):
            await let_orphan_go(self.kube, wl, now)
            return
        if ws.is_true(wl, ws.FINISHED):
            await self._retention(wl, now)
            return
        spec = wl.get("spec") or {}
        active = spec.get("active", True) is not False
        target = ws.find_condition(wl, ws.DEACTIVATION_TARGET)
        if active and target is not None and target.get("status") == "True":
            await self._deactivate(wl)
            return
        if not active:
            await self._evict_deactivated(wl, target, now)
            return
        requeued = ws.find_condition(wl, ws.REQUEUED)
        if requeued is not None and requeued.get("status") == "False" and \
                str(requeued.get("reason", "")).startswith("Deactivated"):
            await update_status(self.kube, WORKLOADS, wl, lambda s: _reactivate(s, now))
            return
        requeue_state = (wl.get("status") or {}).get("requeueState") or {}
        requeue_at = ws.parse_time(requeue_state.get("requeueAt"))
        if requeue_at is not None and self.on_requeue_at is not None:
            self.on_requeue_at(requeue_at)
        if (wl.get("spec") or {}).get("preemptionGates") or (wl.get("status") or {}).get("preemptionGates"):
            written = await update_status(self.kube, WORKLOADS, wl, lambda s: ws.sync_preemption_gate_states(
                wl.get("spec") or {}, s, now))
            if written is not None:
                return  # its update event brings it back
        if await self._max_execution_time(wl, now):
            return
        await self._sync_admission_checks(wl, now)
        await self._pods_ready_timeout(wl, now)

    async def _sync_admission_checks(self, wl: Obj, now: float) -> None:
        """Keep ``status.admissionChecks`` of a reserving Workload in step with its ClusterQueue's
        ``admissionChecksStrategy``: new checks are added Pending (an Admitted workload is not
        evicted for it), removed ones dropped, the list sorted by name."""
        admission = (wl.get("status") or {}).get("admission") or {}
        if self.cluster_queues is None or not admission or not ws.is_true(wl, ws.QUOTA_RESERVED) or \
                ws.is_true(wl, ws.EVICTED):
            return
        if (wl["metadata"].get("labels") or {}).get(PARENT_LABEL) == "true":
            return  # ConcurrentAdmission: its variants run the checks (Kueue skips parents)
        cq = self.cluster_queues.get(None, str(admission.get("clusterQueue", "")))
        if cq is None:
            return
        want = applicable_checks(wl, cq)
        have = [c.get("name") for c in (wl.get("status") or {}).get("admissionChecks") or []]
        if have == want:
            return

        def sync(status: Obj) -> bool:
            existing = {c.get("name"): c for c in status.get("admissionChecks") or []}
            entries = [existing.get(name) or {"name": name, "state": "Pending", "message": "",
                                              "lastTransitionTime": ws.format_time(now)} for name in want]
            if [e.get("name") for e in status.get("admissionChecks") or []] == want:
                return False
            if entries:
                status["admissionChecks"] = entries
            else:
                status.pop("admissionChecks", None)
            return True

        await update_status(self.kube, WORKLOADS, wl, sync)

    async def _max_execution_time(self, wl: Obj, now: float) -> bool:
        """``spec.maximumExecutionTimeSeconds``: counted over every Admitted interval; when it is used
        up the Workload is deactivated (via ``DeactivationTarget``), and the count starts over."""
        limit = (wl.get("spec") or {}).get("maximumExecutionTimeSeconds")
        admitted = ws.find_condition(wl, ws.ADMITTED)
        if not limit or admitted is None or admitted.get("status") != "True" or ws.is_true(wl, ws.EVICTED):
            return False
        since = ws.parse_time(admitted.get("lastTransitionTime"))
        if since is None:
            return False
        past = int((wl.get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0)
        remaining = int(limit) - past - (now - since)
        if remaining > 0:
            self.queue.add_after(_key(wl), remaining)
            return False

        def expire(status: Obj) -> bool:
            status.pop("accumulatedPastExecutionTimeSeconds", None)
            return ws.set_condition(status, ws.DEACTIVATION_TARGET, "True", "MaximumExecutionTimeExceeded",
                                    "exceeding the maximum execution time", now)

        await update_status(self.kube, WORKLOADS, wl, expire)
        return True

    async def _retention(self, wl: Obj, now: float) -> None:
        """``objectRetentionPolicies.workloads.afterFinished``: delete a Finished Workload that long
        after it finished (once its finalizer is gone, so its job is done with it)."""
        after = self.delete_finished_after
        meta = wl["metadata"]
        if after is None or meta.get("deletionTimestamp") or FINALIZER in (meta.get("finalizers") or []):
            return
        finished = ws.parse_time((ws.find_condition(wl, ws.FINISHED) or {}).get("lastTransitionTime"))
        if finished is None:
            return
        if now < finished + after:
            self.queue.add_after(_key(wl), finished + after - now)
            return
        try:
            await self.kube.delete(WORKLOADS, meta.get("namespace"), meta["name"], uid=meta.get("uid"))
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def _deactivate(self, wl: Obj) -> None:
        def deactivate(obj: Obj) -> bool:
            if obj.setdefault("spec", {}).get("active") is False:
                return False
            obj["spec"]["active"] = False
            return True

        await update(self.kube, WORKLOADS, wl, deactivate)

    async def _evict_deactivated(self, wl: Obj, target: Obj | None, now: float) -> None:
        if ws.is_true(wl, ws.EVICTED) and target is None:
            return
        if target is not None and target.get("status") == "True":
            reason = f"DeactivatedDueTo{target.get('reason', '')}"
            message = f"The workload is deactivated due to {target.get('message', '')}"
            cause = str(target.get("reason", ""))
        else:
            reason, message, cause = "Deactivated", "The workload is deactivated", ""
        holds_quota = ws.is_true(wl, ws.QUOTA_RESERVED)

        def evict(status: Obj) -> bool:
            changed = ws.remove_condition(status, ws.DEACTIVATION_TARGET)
            if not ws.is_true(status, ws.EVICTED):
                ws.evict(status, "Deactivated" if not cause else reason, message, now, cause)
                changed = True
            if status.pop("requeueState", None):
                changed = True
            if status.get("admission") is None:
                changed |= ws.set_condition(status, ws.REQUEUED, "False", reason, message, now)
            return changed

        written = await update_status(self.kube, WORKLOADS, wl, evict)
        if written is not None and holds_quota and self.on_evicted is not None:
            self.on_evicted(written, "Deactivated" if not cause else reason, cause)

    async def _pods_ready_timeout(self, wl: Obj, now: float) -> None:
        config = self.wait_for_pods_ready
        if config is None or not ws.is_true(wl, ws.ADMITTED) or ws.is_true(wl, ws.EVICTED):
            return
        if read_variant(wl["metadata"])[0]:
            return  # a ConcurrentAdmission variant has no pods: its parent's timeout applies
        pods_ready = ws.find_condition(wl, ws.PODS_READY)
        if pods_ready is not None and pods_ready.get("status") == "True":
            return
        if pods_ready is not None and pods_ready.get("reason") == "WaitForRecovery":
            if config.recovery_timeout is None:
                return
            since = ws.parse_time(pods_ready.get("lastTransitionTime"))
            timeout, cause = config.recovery_timeout, "WaitForRecovery"
        else:
            admitted = ws.find_condition(wl, ws.ADMITTED)
            since = ws.parse_time((admitted or {}).get("lastTransitionTime"))
            timeout, cause = config.timeout, "WaitForStart"
        if since is None:
            return
        deadline = since + timeout
        if now < deadline:
            self.queue.add_after(_key(wl), deadline - now)
            return
        strategy = config.requeuing_strategy
        count = int(((wl.get("status") or {}).get("requeueState") or {}).get("count") or 0)
        if strategy.backoff_limit_count is not None and count + 1 > strategy.backoff_limit_count:
            message = "exceeding the maximum number of re-queuing retries"
            await update_status(self.kube, WORKLOADS, wl, lambda s: ws.set_condition(
                s, ws.DEACTIVATION_TARGET, "True", "RequeuingLimitExceeded", message, now))
            return
        namespace, name = _key(wl)
        message = f"Exceeded the PodsReady timeout {namespace}/{name}"
        requeue_at: list[float] = []

        def evict(status: Obj) -> bool:
            if ws.is_true(status, ws.EVICTED) or status.get("admission") is None:
                return False
            requeue_at.append(ws.requeue_after_pods_ready_timeout(
                status, now, strategy.backoff_base_seconds, strategy.backoff_max_seconds))
            return ws.evict(status, "PodsReadyTimeout", message, now, cause)

        written = await update_status(self.kube, WORKLOADS, wl, evict)
        if written is not None and self.on_evicted is not None:
            self.on_evicted(written, "PodsReadyTimeout", cause)
        if requeue_at and self.on_requeue_at is not None:
            self.on_requeue_at(requeue_at[-1])


async def let_orphan_go(kube: Client, workload: Obj, now: float) -> None:
    """A Workload whose job is gone: finished (``OwnerNotFound``), so that its quota is released,
    and its finalizer dropped (Kueue's ``FinalizeOrphanedWorkload``). A Workload gone meanwhile
    is let go already."""
    if not ws.is_true(workload, ws.FINISHED):
        try:
            workload = await update_status(kube, WORKLOADS, workload, lambda s: ws.finish(
                s, "OwnerNotFound", "The workload's owner no longer exists", now)) or workload
        except NotFound:
            return
    await remove_finalizer(kube, workload)


async def let_orphans_go(kube: Client, workloads: Iterable[Obj], controlled: Callable[[Obj], bool],
                         now: float) -> None:
    """A job (or a Pod) is gone: each of ``workloads`` it ``controlled`` that still has kadmit's
    finalizer is let go, as Kueue's job reconciler does for a job not found. The Workload
    reconciler does the same when a Workload's event finds its owner gone, but the two informers
    are separate streams: the Workload's deletion can be applied before its owner's, and then
    only the owner's reconciler, finding the owner gone, sees it."""
    for workload in list(workloads):
        if controlled(workload) and FINALIZER in (workload["metadata"].get("finalizers") or []):
            await let_orphan_go(kube, workload, now)


async def remove_finalizer(kube: Client, workload: Obj) -> None:
    """Let the Workload go: drop kadmit's finalizer (nothing is written when it is not there, and a
    Workload already gone is fine). The job reconciler calls it too, for the Workloads it deletes."""
    await update_unless_gone(kube, WORKLOADS, workload, without_finalizer(FINALIZER))


def _reactivate(status: Obj, now: float) -> bool:
    changed = ws.set_condition(status, ws.REQUEUED, "True", "Reactivated", "The workload was reactivated",
                               now)
    if status.pop("requeueState", None):
        changed = True
    return changed


def _key(wl: Obj) -> Key:
    return wl["metadata"].get("namespace", ""), wl["metadata"]["name"]
