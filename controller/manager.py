"""The manager: one set of caches, the engine they feed, and the loops that act on both.

Start order matters and is the whole point of this module: every informer lists first, the
engine is then built from those lists (so quota held by existing Workloads, their
``status.admission``, is charged before anything new is considered), and only then do the
loops that write start. A replica that is not the leader keeps the same warm caches and engine
but writes nothing; when it wins the Lease it starts its loops at once, without a relist.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from kadmit import workload as ws
from kadmit.controller.concurrent_admission import ConcurrentAdmissionReconciler
from kadmit.controller.config import PREEMPTION_STRATEGY_SETS, Configuration
from kadmit.controller.group_reconciler import GroupReconciler
from kadmit.controller.in_use import InUseFinalizers
from kadmit.controller.job_reconciler import WORKERS as JOB_WORKERS
from kadmit.controller.job_reconciler import Caches, IntegrationContext, JobReconciler
from kadmit.controller.jobs.integration import ComposableIntegration, JobIntegration
from kadmit.controller.jobs.job_integration import BatchJobIntegration
from kadmit.controller.jobs.parent_pods import ParentKind, ParentPodLabeller
from kadmit.controller.jobs.podtemplate import PODSET_LABEL
from kadmit.controller.jobs.statefulset import StatefulSetScaling
from kadmit.controller.queue_status import QueueStatusReconciler
from kadmit.controller.scheduler import Scheduler, SchedulerObserver
from kadmit.controller.workload_reconciler import WORKERS as WORKLOAD_WORKERS
from kadmit.controller.workload_reconciler import WorkloadReconciler
from kadmit.engine import Engine, InvalidObject
from kadmit.kube import Client, EventRecorder, Handler, Informers, KeyedReconciler, Obj, Resource
from kadmit.kube.informer import Informer
from kadmit.kube.objects import CONTROLLER_INDEX, OWNER_INDEX, controller_keys, owner_uids
from kadmit.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    COHORTS,
    KUEUE,
    LIMIT_RANGES,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    RUNTIME_CLASSES,
    STATEFUL_SETS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from kadmit.kube.retry import served

logger = logging.getLogger(__name__)

COMPONENT = "kadmit-controller-manager"  # what kadmit's Events name as their source


# What the engine is fed, and how a deletion reaches it.
_ENGINE_KINDS: list[tuple[Resource, str, Callable[[Engine, Obj], None]]] = [
    (RESOURCE_FLAVORS, "ResourceFlavor", lambda e, o: e.delete_resource_flavor(o["metadata"]["name"])),
    (COHORTS, "Cohort", lambda e, o: e.delete_cohort(o["metadata"]["name"])),
    (CLUSTER_QUEUES, "ClusterQueue", lambda e, o: e.delete_cluster_queue(o["metadata"]["name"])),
    (
        LOCAL_QUEUES,
        "LocalQueue",
        lambda e, o: e.delete_local_queue(o["metadata"]["namespace"], o["metadata"]["name"]),
    ),
    (
        WORKLOAD_PRIORITY_CLASSES,
        "WorkloadPriorityClass",
        lambda e, o: e.delete_priority_class(o["metadata"]["name"]),
    ),
    (ADMISSION_CHECKS, "AdmissionCheck", lambda e, o: e.delete_admission_check(o["metadata"]["name"])),
    (NAMESPACES, "Namespace", lambda e, o: e.delete_namespace(o["metadata"]["name"])),
    (
        LIMIT_RANGES,
        "LimitRange",
        lambda e, o: e.delete_limit_range(o["metadata"]["namespace"], o["metadata"]["name"]),
    ),
    (RUNTIME_CLASSES, "RuntimeClass", lambda e, o: e.delete_runtime_class(o["metadata"]["name"])),
    (
        WORKLOADS,
        "Workload",
        lambda e, o: e.delete_workload(o["metadata"]["namespace"], o["metadata"]["name"]),
    ),
]


class StartFailed(RuntimeError):
    """kadmit cannot start on this cluster; the message says why in one line."""


class MissingAPI(StartFailed):
    """The cluster does not serve a kind kadmit cannot work without (Kueue's CRDs)."""


class CachesNotSynced(StartFailed):
    """The caches did not hold a complete list within ``controller.cacheSyncTimeout``: as a
    controller-runtime manager, kadmit then stops (to be restarted) rather than wait forever."""


def integrations_for(config: Configuration) -> list[JobIntegration]:
    found: list[JobIntegration] = []
    for framework in config.frameworks:
        if framework == "batch/job":
            found.append(BatchJobIntegration())
        elif framework == "jobset.x-k8s.io/jobset":
            from kadmit.controller.jobs.jobset_integration import JobSetIntegration

            found.append(JobSetIntegration())
        elif framework.startswith("kubeflow.org/"):
            from kadmit.controller.jobs.kubeflow import KubeflowIntegration
            from kadmit.webhook.kubeflow import BY_FRAMEWORK

            found.append(KubeflowIntegration(BY_FRAMEWORK[framework]))
        elif framework == "trainer.kubeflow.org/trainjob":
            from kadmit.controller.jobs.trainjob import TrainJobIntegration

            found.append(TrainJobIntegration())
        elif framework == "ray.io/rayjob":
            from kadmit.controller.jobs.ray import RayJobIntegration

            found.append(RayJobIntegration())
        elif framework == "ray.io/raycluster":
            from kadmit.controller.jobs.ray import RayClusterIntegration

            found.append(RayClusterIntegration())
        elif framework == "workload.codeflare.dev/appwrapper":
            from kadmit.controller.jobs.appwrapper import AppWrapperIntegration

            found.append(AppWrapperIntegration())
    return found


def composable_integrations_for(config: Configuration) -> list[ComposableIntegration]:
    """The enabled kinds whose Workload covers several objects (Kueue's composable jobs)."""
    found: list[ComposableIntegration] = []
    if any(f in config.frameworks for f in ("pod", *RIDING_ON_PODS)):
        from kadmit.controller.jobs.pod_integration import PodIntegration

        found.append(PodIntegration(implicit="pod" not in config.frameworks))
    return found


#: Frameworks whose kinds are admitted through their Pods: (framework, apiVersion, group, kind).
RIDING_ON_PODS = {
    "deployment": ("apps/v1", "apps", "Deployment"),
    "statefulset": ("apps/v1", "apps", "StatefulSet"),
    "leaderworkerset.x-k8s.io/leaderworkerset": (
        "leaderworkerset.x-k8s.io/v1",
        "leaderworkerset.x-k8s.io",
        "LeaderWorkerSet",
    ),
}


#: Kinds no Kueue framework names, run as Kueue-based platforms run them: through the objects an
#: enabled framework manages (framework -> (apiVersion, Kind) of each). KServe's InferenceService
#: runs its predictor as a Deployment carrying its labels, Tekton's PipelineRun its tasks as Pods
#: carrying its labels (Kueue's "Run A Tekton Pipeline"); see docs/kinds.md.
THROUGH = {
    "deployment": (("serving.kserve.io/v1beta1", "InferenceService"),),
    "pod": (("tekton.dev/v1", "PipelineRun"),),
}


def parent_kind(framework: str) -> ParentKind | None:
    """The pod-group rules of a framework whose Pods are labelled into groups (None: Pods alone)."""
    if framework == "statefulset":
        from kadmit.controller.jobs.statefulset import StatefulSetKind

        return StatefulSetKind()
    if framework == "leaderworkerset.x-k8s.io/leaderworkerset":
        from kadmit.controller.jobs.leaderworkerset import LeaderWorkerSetKind

        return LeaderWorkerSetKind()
    return None


class Manager:
    def __init__(
        self,
        client: Client,
        config: Configuration,
        *,
        clock: Callable[[], float] = time.time,
        observer: SchedulerObserver | None = None,
        engine: Engine | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.kube = client
        if engine is None:
            fair_sharing = config.fair_sharing_strategies is not None
            strategies = config.fair_sharing_strategies or PREEMPTION_STRATEGY_SETS[0]
            wait = config.wait_for_pods_ready
            engine = Engine(
                fair_sharing=fair_sharing,
                preemption_strategies=strategies,
                block_admission=wait is not None and wait.block_admission,
                requeuing_timestamp=wait.requeuing_strategy.timestamp if wait is not None else "Eviction",
                admission_fair_sharing=config.admission_fair_sharing,
                concurrent_admission=config.concurrent_admission,
                resource_transformations=config.resource_transformations,
            )
        self.engine = engine
        self.integrations = integrations_for(config)
        self.composables = composable_integrations_for(config)
        self.riding = [f for f in config.frameworks if f in RIDING_ON_PODS]
        self.informers = Informers(client)
        for resource, _, _ in _ENGINE_KINDS:
            self.informers.get(resource)
        self.informers.get(PRIORITY_CLASSES)
        for integration in self.integrations:
            self.informers.get(integration.resource)
            for related in integration.related:
                self.informers.get(related)
            integration.bind(self._lookup)
        self.workloads = self.informers.get(WORKLOADS)
        self.workloads.add_index(OWNER_INDEX, owner_uids)
        self.workloads.add_index(CONTROLLER_INDEX, controller_keys)
        self.events = EventRecorder(self.kube, COMPONENT)
        self.scheduler = Scheduler(
            self.engine, self.kube, self.workloads, clock=clock, observer=observer, events=self.events
        )
        caches = Caches(
            self.workloads,
            self.informers.get(RESOURCE_FLAVORS),
            self.informers.get(NAMESPACES),
            self.informers.get(WORKLOAD_PRIORITY_CLASSES),
            self.informers.get(PRIORITY_CLASSES),
        )
        context = IntegrationContext(self.kube, caches, config, self.events, clock)
        self.external_kinds = frozenset((group, kind) for group, _, kind in config.external_frameworks)
        managed = frozenset((i.group, i.kind) for i in self.integrations) | self.external_kinds
        self.group_reconcilers = [
            GroupReconciler(
                c, self._members(c), context, workers=config.concurrency(c.kind, c.group, JOB_WORKERS)
            )
            for c in self.composables
        ]
        self.labellers: list[ParentPodLabeller] = []
        self.scalings: list[StatefulSetScaling] = []
        if "statefulset" in self.riding:
            self.scalings.append(
                StatefulSetScaling(self.kube, self.informers.get(STATEFUL_SETS), self.workloads, clock)
            )
        for framework in self.riding:
            parent = parent_kind(framework)
            if parent is not None:
                self.labellers.append(
                    ParentPodLabeller(
                        parent,
                        self.kube,
                        self.informers.get(PODS, label_selector=parent.pod_selector),
                        self.informers.get(parent.resource),
                        self.workloads,
                        config.manage_jobs_without_queue_name,
                    )
                )
        # The Pods of started jobs (their templates carry the pod-set label): an elastic job's
        # are created behind a scheduling gate, lifted by its job reconciler.
        started_pods = self.informers.get(PODS, label_selector=PODSET_LABEL) if self.integrations else None
        if started_pods is not None:
            started_pods.add_index(OWNER_INDEX, owner_uids)
        self.job_reconcilers = [
            JobReconciler(
                i,
                self.informers.get(i.resource),
                context,
                managed_kinds=managed,
                pods=started_pods,
                workers=config.concurrency(i.kind, i.group, JOB_WORKERS),
            )
            for i in self.integrations
        ]
        self.workload_reconciler = WorkloadReconciler(
            self.kube,
            self.workloads,
            self._owner_exists,
            config.wait_for_pods_ready,
            clock=clock,
            on_requeue_at=self.scheduler.wake_at,
            on_evicted=observer.evicted if observer is not None else None,
            cluster_queues=self.informers.get(CLUSTER_QUEUES),
            delete_finished_after=config.delete_finished_workloads_after,
            workers=config.concurrency("Workload", "kueue.x-k8s.io", WORKLOAD_WORKERS),
        )
        self.concurrent_admission = (
            ConcurrentAdmissionReconciler(
                self.kube,
                self.workloads,
                self.informers.get(LOCAL_QUEUES),
                self.informers.get(CLUSTER_QUEUES),
                self.events,
                clock=clock,
            )
            if config.concurrent_admission
            else None
        )
        self.queue_status = QueueStatusReconciler(self.kube, self.engine, self.informers, clock=clock)
        self.in_use = InUseFinalizers(
            self.kube,
            self.informers.get(CLUSTER_QUEUES),
            self.informers.get(RESOURCE_FLAVORS),
            self.workloads,
        )
        # What a LimitRange or a RuntimeClass changes: the requests of Workloads the engine read.
        rereads: dict[str, Callable[[Obj], None]] = {
            "LimitRange": self._limit_range_changed,
            "RuntimeClass": self._runtime_class_changed,
        }
        for resource, kind, delete in _ENGINE_KINDS:
            self.informers.get(resource).add_handler(self._engine_feed(kind, delete, rereads.get(kind)))
        self._scheduler_task: asyncio.Task[None] | None = None
        self.leading = False
        self.synced = False

    def _lookup(self, resource: Resource, namespace: str | None, name: str) -> Obj | None:
        """An object of a kind an integration reads (its :attr:`related` kinds), from the cache."""
        return self.informers.get(resource).get(namespace if resource.namespaced else None, name)

    def _members(self, integration: ComposableIntegration) -> Informer:
        return self.informers.get(integration.resource, label_selector=integration.member_label_selector)

    @property
    def managed_kinds(self) -> frozenset[tuple[str, str]]:
        """(group, kind) of every enabled integration, composable ones included, and of the
        external frameworks: a Job or Pod one of these controls is its owner's, not queued alone."""
        return frozenset(
            {(i.group, i.kind) for i in self.integrations}
            | {(c.group, c.kind) for c in self.composables if not c.implicit}
            | {RIDING_ON_PODS[f][1:] for f in self.riding}
            | self.external_kinds
        )

    def managed_kind_names(self) -> list[str]:
        """Every kind kadmit manages now, as ``<apiVersion> <Kind> (<framework>)``."""
        names = [f"{i.api_version} {i.kind} ({i.framework})" for i in self.integrations]
        names += [
            f"{c.api_version} {c.kind} and pod groups ({c.framework})"
            for c in self.composables
            if not c.implicit
        ]
        names += [f"{RIDING_ON_PODS[f][0]} {RIDING_ON_PODS[f][2]} ({f})" for f in self.riding]
        names += [
            f"{api_version} {kind} (through {f})"
            for f, kinds in THROUGH.items()
            if f in self.config.frameworks
            for api_version, kind in kinds
        ]
        return names

    def _engine_feed(
        self, kind: str, delete: Callable[[Engine, Obj], None], reread: Callable[[Obj], None] | None = None
    ) -> Handler:
        """The engine's handler of one kind; ``reread``: what to read again once it changed."""

        def feed(event: str, obj: Obj, old: Obj | None) -> None:
            try:
                if event == "DELETED":
                    delete(self.engine, obj)
                else:
                    obj.setdefault("kind", kind)
                    self.engine.upsert(obj)
            except InvalidObject as exc:
                logger.warning("%s %s ignored by the scheduler: %s", kind, _name(obj), exc)
            else:
                if reread is not None:
                    reread(obj)
            self.scheduler.wake()

        return feed

    def _limit_range_changed(self, obj: Obj) -> None:
        self._read_pending_again(self.workloads.list(str(obj["metadata"].get("namespace", ""))))

    def _runtime_class_changed(self, obj: Obj) -> None:
        name = str(obj["metadata"].get("name", ""))
        self._read_pending_again(wl for wl in self.workloads.list() if name in ws.runtime_class_names(wl))

    def _read_pending_again(self, workloads: Iterable[Obj]) -> None:
        """The engine reads these Workloads again, but those holding quota: what they hold is what
        their admission says (Kueue's Workload controller requeues pending ones likewise)."""
        for workload in workloads:
            if ws.is_true(workload, ws.QUOTA_RESERVED):
                continue
            try:
                self.engine.upsert_workload(workload)
            except InvalidObject as exc:
                logger.warning("Workload %s ignored by the scheduler: %s", _name(workload), exc)

    def _owner_exists(self, workload: Obj) -> bool:
        namespace = workload["metadata"].get("namespace")
        for ref in workload["metadata"].get("ownerReferences") or []:
            for integration in self.integrations:
                if ref.get("kind") != integration.kind:
                    continue
                job = self.informers.get(integration.resource).get(namespace, ref.get("name", ""))
                if job is not None and job["metadata"].get("uid") == ref.get("uid"):
                    return True
            for composable in self.composables:
                if ref.get("kind") != composable.kind or ref.get("apiVersion") != composable.api_version:
                    continue
                member = self._members(composable).get(namespace, ref.get("name", ""))
                if member is not None and member["metadata"].get("uid") == ref.get("uid"):
                    return True
            kinds = [i.kind for i in self.integrations] + [c.kind for c in self.composables]
            if ref.get("kind") not in kinds:
                return True  # an owner kind kadmit does not watch: assume it is there
        return False

    # -- lifecycle

    async def start_caches(self) -> None:
        """List and watch everything, and build the engine from it (no writes).

        An integration whose kind the cluster does not serve (JobSet without its CRD) is left out,
        with a warning, as Kueue does, rather than waiting forever for a list that cannot succeed.
        """
        for resource in self.informers.resources():
            if resource.group == KUEUE and not await served(self.kube, resource):
                raise MissingAPI(
                    f"the cluster does not serve {resource.plural}.{resource.group}/"
                    f"{resource.version}: install Kueue's CRDs first "
                    f"(kubectl apply --server-side -k manifests/crds)"
                )
        for integration in list(self.integrations):
            needed = (integration.resource, *integration.related)
            if not all([await served(self.kube, r) for r in needed]):
                logger.warning(
                    "integration %s disabled: the cluster does not serve %s",
                    integration.framework,
                    integration.resource,
                )
                self.integrations.remove(integration)
                for resource in needed:
                    self.informers.discard(resource)
                self.job_reconcilers = [r for r in self.job_reconcilers if r.integration is not integration]
        for labeller in list(self.labellers):
            if not await served(self.kube, labeller.kind.resource):
                logger.warning(
                    "integration %s disabled: the cluster does not serve %s",
                    labeller.kind.framework,
                    labeller.kind.resource,
                )
                self.labellers.remove(labeller)
                self.informers.discard(labeller.kind.resource)
                self.informers.discard(PODS, label_selector=labeller.kind.pod_selector)
                self.riding = [f for f in self.riding if RIDING_ON_PODS[f][2] != labeller.kind.resource.kind]
        await self.informers.start()
        # The order of the first lists does not matter to the engine: it rebuilds its cohort tree
        # and usage from whatever it holds when it next schedules.
        try:
            async with asyncio.timeout(self.config.cache_sync_timeout):
                await self.informers.wait_synced()
        except TimeoutError:
            pending = sorted(str(i.resource) for i in self.informers if not i.synced)
            raise CachesNotSynced(
                f"caches not synced within {self.config.cache_sync_timeout:g}s "
                f"(controller.cacheSyncTimeout): {', '.join(pending)}"
            ) from None
        self.synced = True
        logger.info(
            "caches synced: %d workloads, %d reserving quota",
            len(self.workloads),
            self.engine.reservation_count(),
        )

    def _kind_reconcilers(self) -> list[KeyedReconciler]:
        """The loops of the job kinds: jobs, pod groups, parents' Pods, StatefulSet scaling."""
        return [*self.job_reconcilers, *self.group_reconcilers, *self.labellers, *self.scalings]

    async def start_loops(self) -> None:
        """Become the writer: reconcile jobs and workloads, and schedule."""
        if self.leading:
            return
        self.leading = True
        await self.workload_reconciler.start()
        for reconciler in self._kind_reconcilers():
            await reconciler.start()
        await self.queue_status.start()
        await self.in_use.start()
        if self.concurrent_admission is not None:
            await self.concurrent_admission.start()
        self._scheduler_task = asyncio.create_task(self.scheduler.run(), name="scheduler")
        for wl in self.workloads.list():
            requeue_at = ((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt")
            if requeue_at:
                self.workload_reconciler.queue.add((wl["metadata"]["namespace"], wl["metadata"]["name"]))
        self.scheduler.wake()

    async def stop_loops(self) -> None:
        if not self.leading:
            return
        self.leading = False
        if self._scheduler_task is not None:
            self._scheduler_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scheduler_task
            self._scheduler_task = None
        for reconciler in self._kind_reconcilers():
            await reconciler.stop()
        await self.workload_reconciler.stop()
        await self.queue_status.stop()
        await self.in_use.stop()
        if self.concurrent_admission is not None:
            await self.concurrent_admission.stop()

    async def start(self) -> None:
        await self.start_caches()
        await self.start_loops()

    async def stop(self) -> None:
        await self.stop_loops()
        await self.events.drain()
        await self.informers.stop()


def _name(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    return f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
