"""Job ⇄ Workload: Kueue's reconcile loop for one job (``ReconcileGenericJob``, contract §4.5).

Every event about a job, or about a Workload it owns, queues the job; one reconcile looks at
both as they are now and takes the first step that applies: ignore it, keep exactly one
matching Workload, finish it, stop the job when it is evicted (then give the quota back once
its pods are gone), start it once admitted, or stop it when it runs unadmitted. Writes carry
the resourceVersion they were computed from; a conflict just queues the job again, and the
next reconcile starts over from the informers' fresher copies.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kadmit import workload as ws
from kadmit.checks.multikueue_remote import ORIGIN_LABEL
from kadmit.controller.config import Configuration
from kadmit.controller.jobs import slices as sl
from kadmit.controller.jobs.construct import (
    JOB_UID_LABEL,
    PRIORITY_CLASS_LABEL,
    PriorityClassNotFound,
    construct_workload,
    equivalent,
    is_elastic,
    resolve_priority,
)
from kadmit.controller.jobs.integration import JobIntegration
from kadmit.controller.jobs.podtemplate import FlavorNotFound, PodSetMergeError, pod_set_infos
from kadmit.controller.jobs.slices import as_slice
from kadmit.controller.workload_reconciler import let_orphans_go, remove_finalizer
from kadmit.engine.parse import label_selector
from kadmit.engine.slices import REPLACED_REASON
from kadmit.kube import ApiError, Client, NotFound, Obj
from kadmit.kube.events import EventRecorder
from kadmit.kube.informer import Informer
from kadmit.kube.objects import CONTROLLER_INDEX, OWNER_INDEX, controller_key, controller_of
from kadmit.kube.resources import PODS, WORKLOADS
from kadmit.kube.workers import Key, KeyedReconciler
from kadmit.kube.writes import replaced_by, update, update_status
from kadmit.webhook.jobs import prebuilt_workload_name

logger = logging.getLogger(__name__)

RETRY_DELAY = 0.5  # a condition (pods still running, a flavor not yet seen) expected to change soon
SLICE_HANDOVER = 2.0
"""Seconds the scheduler has to finish a replaced Workload slice before the job reconciler does."""


@dataclass(frozen=True)
class Caches:
    """The informers a job reconcile reads besides the jobs: shared by all integrations."""

    workloads: Informer
    flavors: Informer
    namespaces: Informer
    workload_priority_classes: Informer
    priority_classes: Informer | None


@dataclass(frozen=True)
class IntegrationContext:
    """What the reconcilers of every integration share (the job kinds' and the pod groups'): the
    client, the shared caches, the configuration, the event recorder and the clock."""

    kube: Client
    caches: Caches
    config: Configuration
    events: EventRecorder | None = None
    clock: Callable[[], float] = time.time


WORKERS = 4
"""Keys a job kind's reconciler works on at once, unless ``controller.groupKindConcurrency`` says."""


class IntegrationReconciler(KeyedReconciler):
    """The reconciler of one integration, with what all of them share (:class:`IntegrationContext`)."""

    def __init__(self, kind: str, context: IntegrationContext, workers: int) -> None:
        self.what = kind  # before the workers are made: it names their loop in logs
        super().__init__(workers)
        self.kube = context.kube
        self.caches = context.caches
        self.config = context.config
        self.events = context.events
        self.clock = context.clock
        self.reconciles = 0

    async def _event(self, obj: Obj, kind: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events.emit(obj, kind, reason, message)

    async def _sync_queue_name(self, workload: Obj, queue_name: str) -> None:
        """Keep the Workload's ``spec.queueName`` the one its job names."""
        if (workload.get("spec") or {}).get("queueName", "") != queue_name:
            await update(self.kube, WORKLOADS, workload, lambda obj: ws.set_queue_name(obj, queue_name))


class JobReconciler(IntegrationReconciler):
    """Keeps the jobs of one integration and their Workloads in step."""

    def __init__(
        self,
        integration: JobIntegration,
        jobs: Informer,
        context: IntegrationContext,
        *,
        workers: int = WORKERS,
        managed_kinds: frozenset[tuple[str, str]] = frozenset(),
        pods: Informer | None = None,
    ) -> None:
        """``pods``: the Pods kadmit started (indexed by ``OWNER_INDEX``), for elastic jobs' gates."""
        super().__init__(integration.kind, context, workers)
        self.integration = integration
        self.jobs = self.watch(jobs, self.enqueue)
        self.managed_kinds = managed_kinds or frozenset({(integration.group, integration.kind)})
        self.watch(self.caches.workloads, self._on_workload)
        self.watch(self.caches.workload_priority_classes, self._on_priority_class)
        self.pods = self.watch(pods, self._on_pod) if pods is not None else None

    # -- events

    def _on_workload(self, event: str, workload: Obj, old: Obj | None) -> None:
        self._queue_controller(workload)

    def _on_pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        """A gated Pod of an elastic job: its job may have room to let it start."""
        if event != "DELETED" and sl.is_gated(pod):
            self._queue_controller(pod)

    def _queue_controller(self, obj: Obj) -> None:
        """Queue the job of this integration that controls ``obj`` (its Workload, or its Pod)."""
        name = self._controlling_job(obj)
        if name is not None:
            self.queue.add((obj["metadata"].get("namespace", ""), name))

    def _controlling_job(self, obj: Obj) -> str | None:
        """The name of the job of this integration that controls ``obj``, if one does."""
        ref = controller_of(obj)
        if ref is not None and ref.get("kind") == self.integration.kind and \
                str(ref.get("apiVersion", "")).startswith(self.integration.group + "/"):
            return str(ref["name"])
        return None

    def _on_priority_class(self, event: str, wpc: Obj, old: Obj | None) -> None:
        """A job held for a missing WorkloadPriorityClass goes on once the class exists."""
        if event != "ADDED":
            return
        name = wpc["metadata"]["name"]
        for job in self.jobs.list():
            if (job["metadata"].get("labels") or {}).get(PRIORITY_CLASS_LABEL) == name:
                self.queue.add(_key(job))

    def initial_keys(self) -> list[Key]:
        return [_key(job) for job in self.jobs.list()]

    # -- the reconcile

    async def reconcile(self, namespace: str, name: str) -> None:
        self.reconciles += 1
        job = self.jobs.get(namespace, name)
        if job is None:
            controlled = self.caches.workloads.by_index(
                CONTROLLER_INDEX, controller_key(namespace, self.integration.kind, name))
            await let_orphans_go(self.kube, controlled, lambda wl: self._controlling_job(wl) == name,
                                 self.clock())
            return
        if not self._is_managed(job) or self.integration.skip(job):
            return
        integration = self.integration
        owned = self.caches.workloads.by_index(OWNER_INDEX, str(job["metadata"].get("uid", "")))
        try:
            priority = resolve_priority(
                job, integration.pod_sets(job),
                lambda n: self.caches.workload_priority_classes.get(None, n),
                lambda n: self.caches.priority_classes.get(None, n) if self.caches.priority_classes else None,
                lambda: self.caches.priority_classes.list() if self.caches.priority_classes else [],
                integration.priority_class(job))
        except PriorityClassNotFound as exc:
            await self._event(job, "Warning", "WorkloadPriorityClassNotFound", str(exc))
            return
        expected = construct_workload(integration, job, priority, self.config.label_keys_to_copy)
        prebuilt = prebuilt_workload_name(job)
        workload: Obj | None = None
        if prebuilt:
            workload = await self._prebuilt(job, prebuilt, expected)
            if workload is None:
                return
            owned = []  # the prebuilt Workload is the job's, whatever else it owns

        # 3. exactly one matching workload (an elastic job's: its slices)
        elastic = is_elastic(job) and not prebuilt
        slices: Slices | None = None
        if elastic:
            slices = await self._ensure_slices(job, expected, owned)
            if slices is not None:
                workload, owned = slices.workload, []
        for candidate in owned:
            if workload is None and (ws.is_true(candidate, ws.FINISHED) or equivalent(candidate, expected)):
                workload = candidate
            elif candidate["metadata"].get("deletionTimestamp") is None:
                if not ws.is_true(candidate, ws.QUOTA_RESERVED) and \
                        candidate["metadata"]["name"] == expected["metadata"]["name"]:
                    workload = await self._refresh_spec(candidate, expected)  # stale, unreserved: update
                    continue
                await self._delete_workload(candidate)
                stale_name = candidate["metadata"]["name"]
                await self._event(job, "Normal", "DeletedWorkload",
                                  f"Deleted not matching Workload: {namespace}/{stale_name}")

        if workload is not None and not ws.is_true(workload, ws.FINISHED):
            workload = await self._sync_priority(workload, expected) or workload

        # 4. finished workload: release it and stop
        if workload is not None and ws.is_true(workload, ws.FINISHED):
            await remove_finalizer(self.kube, workload)
            return
        # 5. workload being deleted: stop the job, let the workload go
        if workload is not None and workload["metadata"].get("deletionTimestamp"):
            await self._stop(job, workload, "Workload is deleted")
            await remove_finalizer(self.kube, workload)
            return
        # 6. job finished: so is its workload
        finished = integration.finished(job)
        if finished is not None:
            if workload is not None:
                await update_status(self.kube, WORKLOADS, workload,
                                    lambda s: ws.finish(s, finished.reason, finished.message, self.clock()))
                wl_name = workload["metadata"]["name"]
                await self._event(job, "Normal", "FinishedWorkload",
                                  f"Workload '{namespace}/{wl_name}' is declared finished")
            return
        # 7. no workload: (suspend the job and) create one; an elastic job scaled up keeps
        # running and gets a new slice, which replaces the one it runs on once admitted
        if workload is None:
            if slices is not None:
                expected = as_slice(expected, slices.live)
            elif not integration.is_suspended(job):
                await self._stop(job, None, "No matching Workload")
                return  # the job's own update event brings us back
            created = await self._create_workload(expected)
            if created is not None:
                await self._event(job, "Normal", "CreatedWorkload",
                                  f"Created Workload: {namespace}/{created['metadata']['name']}")
            return
        # 8. reclaimable pods and 9. pods ready
        await self._sync_status(job, workload)
        # 10. evicted: stop the job, then give the quota back once its pods are gone
        evicted = ws.find_condition(workload, ws.EVICTED)
        if evicted is not None and evicted.get("status") == "True":
            await self._stop(job, workload, str(evicted.get("message", "")))
            fresh = self.jobs.get(namespace, name) or job
            if ws.is_true(workload, ws.QUOTA_RESERVED) and not integration.is_active(fresh):
                reason = str(evicted.get("reason", ""))
                requeued = reason in ("Preempted", "NodeFailures")
                message = str(evicted.get("message", ""))
                now = self.clock()
                await update_status(self.kube, WORKLOADS, workload,
                                    lambda s: ws.clear_reservation(s, now, requeued, reason, message))
            elif ws.is_true(workload, ws.QUOTA_RESERVED):
                self.queue.add_after((namespace, name), RETRY_DELAY)  # pods still running
            await self._delete_deactivated(job, workload, evicted)
            return
        # 11. suspended: start once admitted, else keep the queue name current
        if integration.is_suspended(job):
            if ws.is_true(workload, ws.ADMITTED) and ws.is_true(workload, ws.QUOTA_RESERVED):
                await self._start(job, workload)
            elif (workload.get("spec") or {}).get("queueName", "") != integration.queue_name(job) and \
                    not ws.is_true(workload, ws.QUOTA_RESERVED):
                await self._sync_queue_name(workload, integration.queue_name(job))
            return
        # 12. running without admission: stop it; an elastic job's new pods wait at their
        # scheduling gate instead, lifted for as many as its admitted slice grants
        if slices is not None:
            await self._ungate(job, slices.live)
        elif not ws.is_true(workload, ws.ADMITTED):
            await self._stop(job, workload, "Not admitted by cluster queue")
        elif prebuilt and is_elastic(job):
            # A MultiKueue worker's copy of an elastic job: its prebuilt Workload (the manager's
            # slice, replaced by the next one as the manager's job is resized) grants its Pods.
            await self._ungate(job, [workload])

    # -- steps

    async def _delete_deactivated(self, job: Obj, workload: Obj, evicted: Obj) -> None:
        """``objectRetentionPolicies.workloads.afterDeactivatedByKueue``: a job whose Workload kadmit
        deactivated (evicted ``DeactivatedDueTo...``, not a user's ``active: false``) is deleted that
        long after the eviction, what it owns with it (background propagation), as Kueue does."""
        after = self.config.delete_deactivated_workloads_after
        if after is None or (workload.get("spec") or {}).get("active", True) is not False:
            return
        if not str(evicted.get("reason", "")).startswith("DeactivatedDueTo"):
            return
        since = ws.parse_time(evicted.get("lastTransitionTime"))
        if since is None:
            return
        meta = job["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        left = since + after - self.clock()
        if left > 0:
            self.queue.add_after((namespace, name), left)
            return
        deleted = await self.kube.delete(self.integration.resource, namespace, name, uid=meta.get("uid"),
                                         propagation_policy="Background", missing_ok=True)
        if deleted is not None:
            await self._event(job, "Normal", "Deleted", "Deleted job: deactivation retention period expired")

    def _is_managed(self, job: Obj) -> bool:
        meta = job["metadata"]
        namespace = meta.get("namespace", "")
        selector = self.config.managed_jobs_namespace_selector
        if selector is not None:
            ns = self.caches.namespaces.get(None, namespace)
            labels = dict((ns or {}).get("metadata", {}).get("labels") or {})
            labels.setdefault("kubernetes.io/metadata.name", namespace)
            if not label_selector(selector, "Configuration", "managedJobsNamespaceSelector").matches(labels):
                return False
        parent = controller_of(job)
        if parent is not None:
            group = str(parent.get("apiVersion", "")).rpartition("/")[0]
            if (group, parent.get("kind")) in self.managed_kinds:
                return False  # a child job: its parent's workload covers it
        return bool(self.integration.queue_name(job)) or self.config.manage_jobs_without_queue_name

    async def _prebuilt(self, job: Obj, name: str, expected: Obj) -> Obj | None:
        """The job's prebuilt Workload, adopted if needed; None when the job must wait for it.

        Missing, or controlled by another object: the job stays suspended and nothing is created.
        Not matching the job: it is finished with ``OutOfSync``.
        """
        namespace = job["metadata"].get("namespace", "")
        workload = self.caches.workloads.get(namespace, name)
        uid = job["metadata"].get("uid")
        controllers = [r for r in (workload or {}).get("metadata", {}).get("ownerReferences") or []
                       if r.get("controller")]
        if workload is None or any(r.get("uid") != uid for r in controllers):
            if not self.integration.is_suspended(job):
                await self._stop(job, None, f"The prebuilt Workload {name} is missing")
            return None
        if not controllers:
            reference = expected["metadata"]["ownerReferences"][0]

            def adopt(obj: Obj) -> bool:
                meta = obj["metadata"]
                meta["ownerReferences"] = [*(meta.get("ownerReferences") or []), reference]
                if uid:
                    meta.setdefault("labels", {})[JOB_UID_LABEL] = uid
                return True

            await update(self.kube, WORKLOADS, workload, adopt)
            return None  # the adopted copy comes back through the informer
        if is_elastic(job) and sl.replaces(workload) is not None:
            return workload  # a new slice: the job takes its size from it (Kueue skips the check)
        if is_elastic(job) and ORIGIN_LABEL in (job["metadata"].get("labels") or {}) and \
                ws.holds_reservation(workload) and ws.scaled_down(sl.counts(workload), sl.counts(expected)):
            # A MultiKueue copy scaled down: the manager shrinks the Workload before the job, but
            # this watch may show the job first. The Workload's update follows; not out of sync.
            self.queue.add_after(_key(job), RETRY_DELAY)
            return None
        if not ws.is_true(workload, ws.FINISHED) and not equivalent(workload, expected):
            now = self.clock()
            await update_status(self.kube, WORKLOADS, workload, lambda s: ws.finish(
                s, "OutOfSync", "The prebuilt workload is out of sync with its user job", now))
            return None
        return workload

    async def _sync_priority(self, workload: Obj, expected: Obj) -> Obj | None:
        """A changed ``kueue.x-k8s.io/priority-class`` label changes the Workload's priority (§4.3)."""
        want = expected["spec"].get("priorityClassRef")
        have = (workload.get("spec") or {}).get("priorityClassRef")
        if not want or not have or want == have or want.get("kind") != "WorkloadPriorityClass" or \
                have.get("kind") != "WorkloadPriorityClass":
            return None

        def reprioritize(obj: Obj) -> bool:
            obj["spec"]["priorityClassRef"] = dict(want)
            obj["spec"]["priority"] = expected["spec"]["priority"]
            return True

        return await update(self.kube, WORKLOADS, workload, reprioritize)

    async def _refresh_spec(self, workload: Obj, expected: Obj) -> Obj | None:
        def refresh(obj: Obj) -> bool:
            if ws.is_true(obj, ws.QUOTA_RESERVED):
                return False
            obj["spec"].update(expected["spec"])
            return True

        return await update(self.kube, WORKLOADS, workload, refresh)

    async def _ensure_slices(self, job: Obj, expected: Obj, owned: list[Obj]) -> Slices | None:
        """Kueue's ``EnsureWorkloadSlices`` for an elastic job: the slice it goes on with (None in
        ``workload``: create one), after finishing the slices the chain no longer needs; None when
        the job's pod sets changed otherwise than in their counts (then the generic matching)."""
        ended: list[Obj] = []
        for candidate in owned:
            if not ws.is_true(candidate, ws.FINISHED):
                continue
            if (ws.find_condition(candidate, ws.FINISHED) or {}).get("reason") == REPLACED_REASON:
                await remove_finalizer(self.kube, candidate)  # a replaced slice holds nothing
            else:
                ended.append(candidate)
        live = sl.not_finished(owned)
        if not live:  # the job's last slice finished (its job did), or none was made yet
            return Slices(sl.newest(ended), [])
        if len(live) == 1:
            selected: Obj | None = live[0]
        else:
            normalized = sl.normalize(live)
            now = self.clock()
            finished: set[int] = set()
            for stale, reason, message, successor in normalized.finish:
                if successor is not None and _just_reserved(successor, now):
                    # The scheduler finishes a slice its successor replaced, with Kueue's message,
                    # event and metric, as soon as it has written the reservation: give it time.
                    self.queue.add_after(_key(job), SLICE_HANDOVER)
                    continue
                await update_status(self.kube, WORKLOADS, stale, _finisher(reason, message, now))
                finished.add(id(stale))
            live = [w for w in live if id(w) not in finished]
            selected = normalized.selected
        if selected is None:
            return Slices(None, live)
        have, want = sl.counts(selected), sl.counts(expected)
        if set(have) != set(want):
            return None
        resized = [{**p, "count": want[str(p.get("name"))]} for p in _pod_sets(selected)]
        if not equivalent({**selected, "spec": {**selected["spec"], "podSets": resized}}, expected):
            return None  # not only the counts changed: the generic path replaces the Workload
        if have == want:
            return Slices(selected, live)
        if not ws.is_true(selected, ws.QUOTA_RESERVED) or sl.scaled_down(have, want):
            def apply(obj: Obj) -> bool:
                if ws.is_true(obj, ws.QUOTA_RESERVED) and not sl.scaled_down(sl.counts(obj), want):
                    return False  # reserved meanwhile: decide again
                for pod_set in _pod_sets(obj):
                    pod_set["count"] = want[str(pod_set.get("name"))]
                return True

            updated = await update(self.kube, WORKLOADS, selected, apply)
            return Slices(updated or selected, live)
        return Slices(None, live)  # scaled up: a new slice

    async def _ungate(self, job: Obj, live: list[Obj]) -> None:
        """Kueue's ``ElasticJobUngater``: lift the elastic-job scheduling gate of as many of the
        job's Pods as its active slice grants (the rest wait for a bigger slice)."""
        if self.pods is None:
            return
        active = sl.active_slice(live)
        if active is None:
            return
        pods = self.pods.by_index(OWNER_INDEX, str(job["metadata"].get("uid", "")))
        for pod in sl.pods_to_ungate(pods, sl.counts(active)):
            with contextlib.suppress(NotFound):
                await update(self.kube, PODS, pod, sl.ungate)

    async def _create_workload(self, workload: Obj) -> Obj | None:
        try:
            return await self.kube.create(WORKLOADS, workload)
        except ApiError as exc:
            if exc.status == 409:  # already there: the informer has not shown it yet
                return None
            raise

    async def _delete_workload(self, workload: Obj) -> None:
        meta = workload["metadata"]
        with contextlib.suppress(ApiError):
            await remove_finalizer(self.kube, workload)
        try:
            await self.kube.delete(WORKLOADS, meta.get("namespace"), meta["name"], uid=meta.get("uid"))
        except ApiError as exc:
            if not exc.not_found and exc.status != 409:
                raise

    async def _sync_status(self, job: Obj, workload: Obj) -> None:
        integration = self.integration
        reclaimable = integration.reclaimable_pods(job) if ws.is_true(workload, ws.QUOTA_RESERVED) else []
        wait_for_pods_ready = self.config.wait_for_pods_ready is not None
        admitted = ws.is_true(workload, ws.ADMITTED)
        ready = integration.pods_ready(job) and not integration.is_suspended(job)
        now = self.clock()

        def sync(status: Obj) -> bool:
            changed = False
            have = status.get("reclaimablePods") or []
            if reclaimable and _grows(have, reclaimable):
                status["reclaimablePods"] = reclaimable
                changed = True
            if wait_for_pods_ready and admitted:
                changed |= ws.set_pods_ready(status, ready, now)
            return changed

        await update_status(self.kube, WORKLOADS, workload, sync)

    async def _start(self, job: Obj, workload: Obj) -> None:
        flavors = {f["metadata"]["name"]: f for f in self.caches.flavors.list()}
        try:
            infos = pod_set_infos(workload, flavors)
            started = self.integration.run_with_pod_set_infos(job, infos)
        except FlavorNotFound as exc:
            logger.info("cannot start %s %s yet: %s", self.integration.kind, _name(job), exc)
            self.queue.add_after(_key(job), RETRY_DELAY * 4)
            return
        except (PodSetMergeError, ValueError) as exc:
            message = f"{exc}"
            await update_status(self.kube, WORKLOADS, workload,
                                lambda s: ws.finish(s, "FailedToStart", message, self.clock()))
            await self._event(job, "Warning", "FailedToStart", message)
            return

        # The cache may not have seen an eviction yet: start only on the Workload as the API has it now.
        meta = workload["metadata"]
        fresh = await self.kube.get_or_none(WORKLOADS, meta["namespace"], meta["name"])
        if fresh is None or fresh["metadata"].get("uid") != meta.get("uid") or not ws.is_admitted(fresh):
            logger.info("%s %s not started: its Workload is no longer admitted", self.integration.kind,
                        _name(job))
            self.queue.add_after(_key(job), RETRY_DELAY)  # the cache catches up meanwhile
            return

        await update(self.kube, self.integration.resource, job, replaced_by(lambda _: started), attempts=1)
        cq = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        await self._event(job, "Normal", "Started", f"Admitted by clusterQueue {cq}")

    async def _stop(self, job: Obj, workload: Obj | None, message: str) -> None:
        """Suspend the job, clear its start time, and put the Workload's templates back (§4.6 Stop)."""
        integration = self.integration
        resource = integration.resource
        pod_sets = _pod_sets(workload) if workload is not None else []
        current = job
        if not integration.suspend_flag(current):
            suspend = replaced_by(integration.suspended)
            current = await update(self.kube, resource, current, suspend) or current
            await self._event(job, "Normal", "Stopped", message)
        status_patch = integration.status_after_stop(current)
        if status_patch is not None:
            meta = current["metadata"]
            current = await self.kube.patch(resource, meta.get("namespace"), meta["name"], status_patch,
                                            subresource="status")

        restore = replaced_by(lambda obj: integration.restored(obj, pod_sets))
        await update(self.kube, resource, current, restore)


@dataclass(frozen=True)
class Slices:
    """An elastic job's Workload slices: the one it goes on with (None: create one) and the
    ones not finished, oldest first."""

    workload: Obj | None
    live: list[Obj]


def _just_reserved(workload: Obj, now: float) -> bool:
    """``workload`` got its quota less than :data:`SLICE_HANDOVER` ago."""
    reserved = ws.find_condition(workload, ws.QUOTA_RESERVED) or {}
    since = ws.parse_time(reserved.get("lastTransitionTime"))
    return reserved.get("status") == "True" and since is not None and now - since < SLICE_HANDOVER


def _finisher(reason: str, message: str, now: float) -> Callable[[Obj], bool]:
    def finish(status: Obj) -> bool:
        return not ws.is_true(status, ws.FINISHED) and ws.finish(status, reason, message, now)

    return finish


def _pod_sets(workload: Obj) -> list[Obj]:
    return list((workload.get("spec") or {}).get("podSets") or [])


def _grows(have: list[Obj], want: list[Obj]) -> bool:
    counts = {p.get("name"): int(p.get("count") or 0) for p in have}
    return any(int(p["count"]) > counts.get(p["name"], 0) for p in want)


def _key(job: Obj) -> Key:
    return job["metadata"].get("namespace", ""), job["metadata"]["name"]


def _name(job: Obj) -> str:
    return "/".join(_key(job))
