"""The MultiKueue check (``kueue.x-k8s.io/multikueue``): dispatch to workers, the first to admit wins.

As Kueue's (kueue-contract.md §7): for a Workload holding quota on the manager, a copy is
created on the worker clusters its MultiKueueConfig lists (all at once by default, or a few at
a time with the incremental dispatcher); the first copy a worker's Kueue admits wins: the check
turns Ready with ``status.clusterName``, the other copies are deleted, the Job is created on
the winner (``spec.managedBy`` cleared, so the worker's Job controller runs it) and its status
is mirrored back to the manager's Job, which the manager's Job controller never runs because it
is managed by MultiKueue. Every kind goes through its adapter
(:mod:`kadmit.checks.multikueue_adapters`, chosen by the GVK of the Workload's owner): the Job,
JobSet, Pods and pod groups, the other built-in kinds, and the kinds a user names in
``multiKueue.externalFrameworks``. A remote Workload that finishes finishes the local one; an eviction,
deactivation or deletion on the manager removes the remote objects; orphans are collected every
``gc_interval``; an admitting worker unreachable for ``worker_lost_timeout`` turns the check to
Retry.

The runner drives this plugin like any other; what the runner cannot see (a change on a
worker, a worker lost or back) asks it to evaluate the Workload again (``cluster.requeue``).
The plugin's own queue only (re)connects workers and keeps their MultiKueueCluster ``Active``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from kadmit.checks import plugin
from kadmit.checks.metrics import counter
from kadmit.checks.multikueue_adapters import (
    MultiKueueAdapter,
    builtin_adapters,
    discovered_resource,
    external_frameworks,
    gvk_of_reference,
    gvk_string,
    parse_external_name,
)
from kadmit.checks.multikueue_clusters import (
    KubeConfigError,
    RemoteKey,
    WorkerConnection,
    fingerprint,
    kubeconfig_text,
    parse_kubeconfig,
)
from kadmit.checks.multikueue_remote import (
    CONTROLLER_NAME,
    ORIGIN_LABEL,
    PREBUILT_WORKLOAD,
    admitted_at,
    leaves_copies_alone,
    local_workload_of,
    remote_workload,
    replaced_slice,
    same_spec,
    scaled_down_copy,
)
from kadmit.checks.verdict import Pending, Ready, Rejected, Retry, Verdict
from kadmit.kube import (
    NORMAL,
    ApiError,
    ApiUnreachable,
    Client,
    Conflict,
    NotFound,
    Obj,
    Resource,
    Workers,
    cancel_all,
    merge_patch,
    update_status,
)
from kadmit.kube.objects import REFERENCE_INDEX, reference_uids
from kadmit.kube.pipeline import LastWritten
from kadmit.kube.resources import (
    ADMISSION_CHECKS,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    SECRETS,
    WORKLOADS,
)
from kadmit.workload import (
    ACTIVE,
    FINISHED,
    PENDING,
    READY,
    REJECTED,
    RETRY,
    find_condition,
    find_state,
    holds_reservation,
    is_elastic,
    is_true,
    job_workload_name,
    set_condition,
)

logger = logging.getLogger(__name__)

ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
MAX_CLUSTERS = 20
JOB_SYNC_DEFERRED_SECONDS = 2.0
UNREACHABLE = ApiUnreachable  # what kadmit's client raises when a worker does not answer


@dataclass(frozen=True)
class MultiKueueSettings:
    """Kueue's ``Configuration.multiKueue`` and where kubeconfig Secrets live."""

    namespace: str = "kadmit-system"
    origin: str = "multikueue"
    gc_interval: float = 60.0  # seconds; 0 turns garbage collection off
    worker_lost_timeout: float = 900.0
    dispatcher: str = ALL_AT_ONCE
    incremental_step: int = 3
    incremental_round: float = 300.0
    kubeconfig_root: str | None = "/etc/multikueue/kubeconfigs"  # None: any locationType Path
    reconnect_base: float = 5.0
    frameworks: tuple[str, ...] = ("batch/job",)  # integrations.frameworks: their adapters are on
    external_frameworks: tuple[str, ...] = ()  # multiKueue.externalFrameworks, "Kind.version.group"


_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """A Go ``time.Duration`` string (``90s``, ``1m``, ``1h30m``, ``0``) in seconds."""
    if text == "0":
        return 0.0
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {text!r}")
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


# The ``multiKueue`` fields :func:`settings_from_config` reads (kadmit warns about the others).
CONFIG_FIELDS = frozenset(
    {"dispatcherName", "gcInterval", "workerLostTimeout", "origin", "incrementalDispatcherConfig",
     "externalFrameworks"}
)


def settings_from_config(document: Mapping[str, Any]) -> MultiKueueSettings:
    """Settings from a Kueue ``Configuration`` document (its ``namespace``, ``integrations.frameworks``
    and ``multiKueue`` block).

    Raises ValueError with the offending field for a value Kueue would refuse.
    """
    block = document.get("multiKueue") or {}
    if not isinstance(block, Mapping):
        raise ValueError("multiKueue: must be a mapping")
    options: dict[str, Any] = {}
    namespace = document.get("namespace")
    if namespace is not None:
        if not isinstance(namespace, str) or not namespace:
            raise ValueError("namespace: must be a non-empty string")
        options["namespace"] = namespace
    for field_name, key in (("gc_interval", "gcInterval"), ("worker_lost_timeout", "workerLostTimeout")):
        if key in block:
            try:
                options[field_name] = parse_duration(str(block[key]))
            except ValueError as exc:
                raise ValueError(f"multiKueue.{key}: {exc}") from None
    if "origin" in block:
        origin = block["origin"]
        if not isinstance(origin, str) or len(origin) > 63 or not _LABEL_VALUE.fullmatch(origin):
            raise ValueError(f"multiKueue.origin: {origin!r} is not a valid label value")
        options["origin"] = origin
    if "dispatcherName" in block:
        name = block["dispatcherName"]
        if not isinstance(name, str) or not name:
            raise ValueError("multiKueue.dispatcherName: must be a non-empty string")
        options["dispatcher"] = name
    step = (block.get("incrementalDispatcherConfig") or {}).get("stepSize")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise ValueError(f"multiKueue.incrementalDispatcherConfig.stepSize: must be >= 1, got {step!r}")
        options["incremental_step"] = step
    integrations = document.get("integrations") or {}
    frameworks = integrations.get("frameworks") if isinstance(integrations, Mapping) else None
    if isinstance(frameworks, list) and frameworks:
        options["frameworks"] = tuple(str(f) for f in frameworks)
    options["external_frameworks"] = external_frameworks(block, options.get("frameworks", ("batch/job",)))
    return MultiKueueSettings(**options)


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


@dataclass(frozen=True)
class MultiKueueConfig:
    """A MultiKueueConfig: the candidate workers, in preference order."""

    name: str
    clusters: tuple[str, ...]


def parse_config(obj: Obj) -> MultiKueueConfig:
    clusters = (obj.get("spec") or {}).get("clusters")
    if not isinstance(clusters, list) or not clusters:
        raise plugin.ParametersError("spec.clusters must list at least one MultiKueueCluster")
    if len(clusters) > MAX_CLUSTERS:
        raise plugin.ParametersError(
            f"spec.clusters may list at most {MAX_CLUSTERS} clusters, got {len(clusters)}"
        )
    if not all(isinstance(c, str) and c for c in clusters):
        raise plugin.ParametersError("spec.clusters must be non-empty names")
    if len(set(clusters)) != len(clusters):
        raise plugin.ParametersError("spec.clusters must be unique")
    return MultiKueueConfig(name=obj["metadata"]["name"], clusters=tuple(clusters))


def cluster_activity(config: MultiKueueConfig, clusters: Iterable[Obj]) -> plugin.ActiveCondition:
    """The MultiKueue AdmissionCheck's ``Active``, from the MultiKueueClusters' own ``Active``."""
    by_name = {mkc["metadata"]["name"]: mkc for mkc in clusters}
    missing = [name for name in config.clusters if name not in by_name]
    inactive = [name for name in config.clusters
                if name in by_name and not is_true(by_name[name], "Active")]
    if not missing and not inactive:
        return plugin.ActiveCondition(True, "Active", "The admission check is active")
    parts = []
    if missing:
        parts.append(f"Missing clusters: [{' '.join(missing)}]")  # Go's %v of a []string
    if inactive:
        parts.append(f"Inactive clusters: [{' '.join(inactive)}]")
    if len(missing) + len(inactive) < len(config.clusters):
        return plugin.ActiveCondition(True, "SomeActiveClusters", ", ".join(parts))
    return plugin.ActiveCondition(False, "NoUsableClusters", ", ".join(parts))


class MultiKueueMetrics:
    """Kueue's two MultiKueue counters (kueue-contract.md §8)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry or CollectorRegistry()
        self.dispatched = counter(r, "multikueue_workloads_dispatched_total",
                                  "Workload copies created on worker clusters", "cluster_queue", "cluster")
        self.admitted = counter(r, "multikueue_workloads_admitted_total",
                                "Workloads admitted on a worker cluster (the first to admit)",
                                "cluster_queue", "cluster")


class MultiKueueCheck(plugin.AdmissionCheckPlugin[MultiKueueConfig]):
    """Kueue's MultiKueue admission check, for every kind a MultiKueue adapter handles."""

    controller_name = CONTROLLER_NAME
    parameters_kind = MULTIKUEUE_CONFIGS
    watches: tuple[Resource, ...] = (MULTIKUEUE_CLUSTERS, SECRETS)  # and the adapters' kinds (__init__)
    reevaluate_ready = True
    state_events = False  # as Kueue's: its own "MultiKueue" Events say where the Workload went

    @classmethod
    def from_configuration(
        cls, configuration: Mapping[str, Any], registry: CollectorRegistry | None = None
    ) -> MultiKueueCheck:
        """Kueue's ``namespace`` and ``multiKueue`` settings from the Configuration kadmit runs with."""
        return cls(settings_from_config(configuration), registry=registry)

    def __init__(
        self, settings: MultiKueueSettings | None = None, *, registry: CollectorRegistry | None = None
    ) -> None:
        """``registry``: where the ``multikueue_*`` metrics go (their own registry if None)."""
        self.settings = settings or MultiKueueSettings()
        self.metrics = MultiKueueMetrics(registry)
        if self.settings.dispatcher == INCREMENTAL and self.settings.incremental_step < 1:
            raise ValueError("incremental_step must be at least 1")
        self._cluster: plugin.ClusterView | None = None
        self._workers: Workers[str] = Workers("multikueue-worker", self._sync_cluster, max_delay=30.0)
        self._tasks: list[asyncio.Task[None]] = []
        self.workers: dict[str, WorkerConnection] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._winners: dict[tuple[str, str], str] = {}  # the worker chosen, until Ready records it
        self._unreachable_since: dict[str, float] = {}  # chosen workers missed while not connected
        self._rounds: dict[tuple[str, str], float] = {}  # incremental dispatcher: when the last round began
        self._workload_failures: dict[tuple[str, str], int] = {}
        # kubeconfig Secrets live in Kueue's namespace: no need to read Secrets cluster-wide
        self.namespaced_watches = {SECRETS: self.settings.namespace}
        # The adapters by GVK: the enabled built-in kinds, then the external frameworks (their
        # resource is found by discovery on the manager when the check starts).
        self.adapters: dict[str, MultiKueueAdapter] = builtin_adapters(self.settings.frameworks)
        self._external = {gvk_string(*parse_external_name(name)): parse_external_name(name)
                          for name in self.settings.external_frameworks}
        self._watched = {a.resource: a for a in self.adapters.values() if a.watch_on_manager}
        self.watches = (MULTIKUEUE_CLUSTERS, SECRETS, *self._watched)
        # The local job objects whose status this check wrote, until the manager's watch has them:
        # the next evaluation (a worker's events come fast) reads what it wrote, not a stale copy
        # it would write over again.
        self._written: dict[Resource, LastWritten] = {}
        # The job objects this check created on a worker, until that worker's watch shows them
        # (worker, kind, namespace, name): until then only a read tells whether one is there.
        self._jobs_created: set[tuple[str, Resource, str, str]] = set()

    # -- the plugin interface

    def parse_parameters(self, obj: Obj) -> MultiKueueConfig:
        return parse_config(obj)

    async def active_condition(
        self, admission_check: Obj, context: plugin.ActiveContext[MultiKueueConfig]
    ) -> plugin.ActiveCondition:
        """Kueue's rule (kueue-contract.md §7): active while at least one listed worker is Active."""
        if context.problem is not None or context.parameters is None:
            return plugin.ActiveCondition(False, "BadConfig",
                                   f"Cannot load the AdmissionChecks parameters: {context.problem}")
        return cluster_activity(context.parameters, context.cluster.list(MULTIKUEUE_CLUSTERS))

    async def evaluate(self, workload: Obj, context: plugin.CheckContext[MultiKueueConfig]) -> Verdict:
        assert context.parameters is not None
        key = (workload["metadata"]["namespace"], workload["metadata"]["name"])
        async with self._lock(key):
            try:
                verdict = await self._reconcile(workload, context.check_name, context.parameters)
                self._workload_failures.pop(key, None)
                if isinstance(verdict, (Retry, Rejected)):
                    self._winners.pop(key, None)
                return verdict
            except Exception as exc:
                # A failure must not undo a decision: keep the state, try again soon.
                if isinstance(exc, ApiError):
                    logger.warning("MultiKueue %s/%s: %s", *key, exc)
                else:
                    logger.exception("MultiKueue %s/%s failed", *key)
                failures = self._workload_failures[key] = self._workload_failures.get(key, 0) + 1
                context.cluster.requeue(*key, _backoff(failures))
                return _unchanged(context.state)

    async def release(self, workload: Obj, cluster: plugin.ClusterView) -> None:
        """The manager Workload finished, was evicted, deactivated or deleted: remove every remote copy."""
        key = (workload["metadata"]["namespace"], workload["metadata"]["name"])
        if not leaves_copies_alone(workload):  # an elastic job's replaced slice: its job runs on
            clusters = self._config_clusters(workload)
            async with self._lock(key):
                await self._delete_remotes(key, clusters, keep=None)
            old = replaced_slice(workload)
            if old is not None:  # the job's copy runs under the replaced slice until this one's admitted
                async with self._lock(old):
                    await self._delete_remotes(old, clusters, keep=None)
        self._rounds.pop(key, None)
        self._winners.pop(key, None)
        self._workload_failures.pop(key, None)
        refs = workload["metadata"].get("ownerReferences") or []
        jobs = {(key[0], str(ref.get("name", ""))) for ref in refs}
        for job in jobs:
            for written in self._written.values():
                written.forget(job)
        if not leaves_copies_alone(workload):  # its copies were deleted above
            self._jobs_created = {made for made in self._jobs_created if made[2:] not in jobs}
        lock = self._locks.get(key)
        if lock is not None and not lock.locked():
            del self._locks[key]

    def affected(
        self, kind: Resource, obj: Obj, cluster: plugin.ClusterView
    ) -> Iterable[tuple[str, str]] | None:
        if kind == MULTIKUEUE_CLUSTERS:
            self._workers.queue.add(obj["metadata"]["name"])
            return []
        if kind == SECRETS:
            if obj["metadata"].get("namespace") == self.settings.namespace:
                for name in self._clusters_using_secret(obj["metadata"]["name"]):
                    self._workers.queue.add(name)
            return []
        adapter = self._watched.get(kind)
        if adapter is not None:
            if not adapter.is_dispatched(obj):
                return []  # not ours to dispatch; its Workload's own changes re-evaluate it
            return self._workloads_of_job(obj)
        return None

    # -- life cycle

    async def start(self, cluster: plugin.ClusterView) -> None:
        """Connect every worker and start the loops, before any Workload asks (a restart, a new leader)."""
        if self._cluster is not None:
            await self.stop()  # a runner that was not stopped: start afresh with the new view
        self._cluster = cluster
        cluster.add_index(WORKLOADS, REFERENCE_INDEX, reference_uids)  # a job's events find its Workloads
        await self._resolve_external_frameworks()
        await self._workers.start()
        if self.settings.gc_interval > 0:
            self._tasks.append(asyncio.create_task(self._collect_garbage(), name="multikueue-gc"))
        for mkc in cluster.list(MULTIKUEUE_CLUSTERS):
            self._workers.queue.add(mkc["metadata"]["name"])

    async def stop(self) -> None:
        """Stop the loops and drop the worker connections: a replica that stopped leading writes nothing."""
        self._cluster = None
        self._written = {}
        await self._workers.stop()
        await cancel_all(self._tasks)
        connections, self.workers = list(self.workers.values()), {}
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    close = stop

    def _lock(self, key: tuple[str, str]) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    async def _resolve_external_frameworks(self) -> None:
        """An external framework's resource (its plural, its scope) from the manager's discovery."""
        for gvk, (group, version, kind) in list(self._external.items()):
            if gvk in self.adapters:
                continue
            try:
                listing = await self._view().api.request("GET", f"/apis/{group}/{version}")
            except NotFound:
                listing = {}
            except ApiError as exc:
                logger.warning("MultiKueue: discovery of %s failed: %s", gvk, exc)
                continue
            resource = discovered_resource(listing, group, version, kind)
            if resource is None:
                logger.warning("MultiKueue: external framework %s.%s.%s is not served by this cluster",
                               kind, version, group)
                continue
            self.adapters[gvk] = MultiKueueAdapter(resource)
            for name, worker in self.workers.items():  # reconnect: their watches follow the new kind too
                worker.fingerprint = ""
                self._workers.queue.add(name)

    def _job_kinds(self) -> tuple[Resource, ...]:
        return tuple(dict.fromkeys(a.resource for a in self.adapters.values()))

    # -- worker clusters

    def _view(self) -> plugin.ClusterView:
        if self._cluster is None:
            raise RuntimeError("the MultiKueue check is not started (or was stopped)")
        return self._cluster

    def _clusters_using_secret(self, secret: str) -> list[str]:
        names = []
        for mkc in self._view().list(MULTIKUEUE_CLUSTERS):
            source = ((mkc.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
            if (source.get("locationType") or "Secret") == "Secret" and source.get("location") == secret:
                names.append(mkc["metadata"]["name"])
        return names

    async def _sync_cluster(self, name: str) -> None:
        """(Re)connect a worker when its kubeconfig changed, and write its Active condition."""
        view = self._view()
        mkc = view.get(MULTIKUEUE_CLUSTERS, None, name)
        current = self.workers.get(name)
        if mkc is None:
            if current is not None:
                del self.workers[name]
                await current.close()
                self._enqueue_our_workloads()
            return
        try:
            def secret(name: str) -> Obj | None:
                return view.get(SECRETS, self.settings.namespace, name)

            text = await kubeconfig_text(mkc, secret, self.settings.kubeconfig_root)
            config = parse_kubeconfig(text)
        except KubeConfigError as exc:
            if current is not None:
                del self.workers[name]
                await current.close()
                self._enqueue_our_workloads()
            await self._write_cluster_active(mkc, False, exc.reason, exc.message)
            return
        digest = fingerprint(text)
        if current is None or current.fingerprint != digest:
            if current is not None:
                await current.close()
            connection = WorkerConnection(
                name, config, digest, origin=self.settings.origin, on_remote=self._on_remote,
                on_state=self._on_worker_state, reconnect_base=self.settings.reconnect_base,
                kinds=self._job_kinds())
            self.workers[name] = connection
            connection.start()
            current = connection
        status, reason, message = current.describe()
        if not current.connected and not current.attempts:
            return  # still connecting: the connection reports its outcome
        await self._write_cluster_active(mkc, status, reason, message)

    def _on_remote(self, key: RemoteKey) -> None:
        if self._cluster is not None:
            self._view().requeue(*key)

    def _on_worker_state(self, name: str) -> None:
        if self._cluster is None:
            return
        worker = self.workers.get(name)
        if worker is not None and worker.connected:
            self._unreachable_since.pop(name, None)
        self._workers.queue.add(name)
        self._enqueue_our_workloads()

    def _enqueue_our_workloads(self) -> None:
        for wl in self._view().list(WORKLOADS):
            if holds_reservation(wl) and self._our_check(wl) is not None:
                self._view().requeue(*_key(wl))

    async def _write_cluster_active(self, mkc: Obj, status: bool, reason: str, message: str) -> None:
        value = "True" if status else "False"
        await _set_condition(self._view().api, MULTIKUEUE_CLUSTERS, mkc, ACTIVE, value, reason, message)

    def _connected(self, names: Iterable[str]) -> dict[str, Client]:
        out: dict[str, Client] = {}
        for name in names:
            worker = self.workers.get(name)
            if worker is not None and worker.connected and worker.api is not None:
                out[name] = worker.api
        return out

    # -- the manager Workload

    def _our_check(self, wl: Obj) -> str | None:
        view = self._view()
        for entry in (wl.get("status") or {}).get("admissionChecks") or []:
            ac = view.get(ADMISSION_CHECKS, None, str(entry.get("name", "")))
            if ac is not None and (ac.get("spec") or {}).get("controllerName") == CONTROLLER_NAME:
                return str(entry["name"])
        return None

    def _config_of_check(self, check: str) -> MultiKueueConfig | None:
        view = self._view()
        ac = view.get(ADMISSION_CHECKS, None, check) or {}
        ref = (ac.get("spec") or {}).get("parameters") or {}
        obj = view.get(MULTIKUEUE_CONFIGS, None, str(ref.get("name", ""))) if ref.get("name") else None
        if obj is None:
            return None
        try:
            return parse_config(obj)
        except plugin.ParametersError:
            return None

    def _config_clusters(self, wl: Obj) -> list[str]:
        """Every worker the Workload may have copies on (the config's, plus any we know)."""
        check = self._our_check(wl)
        config = self._config_of_check(check) if check else None
        names = list(config.clusters) if config else []
        return list(dict.fromkeys([*names, *sorted(self.workers)]))

    def _workloads_of_job(self, job: Obj) -> list[tuple[str, str]]:
        uid = str(job["metadata"].get("uid") or "")
        return [(wl["metadata"]["namespace"], wl["metadata"]["name"])
                for wl in self._view().by_index(WORKLOADS, REFERENCE_INDEX, uid)]

    async def _owner(self, wl: Obj) -> tuple[MultiKueueAdapter | None, list[Obj], str | None]:
        """The adapter of the Workload's owner (Kueue's lookup: the controller reference, else the
        first), the local objects it covers (the owner first; a pod group's every Pod), or Kueue's
        rejection message."""
        refs = wl["metadata"].get("ownerReferences") or []
        owner = next((ref for ref in refs if ref.get("controller")), refs[0] if refs else None)
        if owner is None:
            return None, [], "No multikueue adapter found"
        gvk = gvk_of_reference(str(owner.get("apiVersion", "")), str(owner.get("kind", "")))
        adapter = self.adapters.get(gvk)
        if adapter is None and gvk in self._external:
            await self._resolve_external_frameworks()  # installed since the check started
            adapter = self.adapters.get(gvk)
        if adapter is None:
            return None, [], f'No multikueue adapter found for owner kind "{gvk}"'
        namespace = wl["metadata"]["namespace"]
        local = await self._local(adapter, namespace, str(owner.get("name", "")))
        if local is None or local["metadata"].get("uid") != owner.get("uid"):
            return adapter, [], None  # not in our cache yet (or gone): nothing to decide on
        problem = adapter.managed_problem(local)
        if problem is not None:
            return adapter, [], f"The owner is not managed by Kueue: {problem}"
        selector = adapter.group_selector(local)
        if selector is None:
            return adapter, [local], None
        listed = await self._view().api.list(adapter.resource, namespace, label_selector=selector)
        uid = local["metadata"]["uid"]
        members = [m for m in listed.get("items") or [] if m["metadata"].get("uid") != uid]
        return adapter, [local, *sorted(members, key=lambda m: str(m["metadata"]["name"]))], None

    async def _local(self, adapter: MultiKueueAdapter, namespace: str, name: str) -> Obj | None:
        """A local job object: from the watch when the kind is watched, else from the API."""
        view = self._view()
        if adapter.resource in self._watched:
            return self._local_written(adapter.resource).latest((namespace, name))
        return await view.api.get_or_none(adapter.resource, namespace, name)

    def _local_written(self, kind: Resource) -> LastWritten:
        written = self._written.get(kind)
        if written is None:
            view = self._view()
            written = self._written[kind] = LastWritten(lambda ns, name: view.get(kind, ns, name))
        return written

    async def _patch_local_status(self, kind: Resource, local: Obj, status: Obj) -> None:
        namespace, name = local["metadata"].get("namespace"), str(local["metadata"]["name"])
        patched = await self._view().api.patch(kind, namespace, name, {"status": status},
                                               subresource="status")
        if kind in self._watched:
            self._local_written(kind).remember((namespace, name), patched)

    async def _reconcile(self, wl: Obj, check: str, config: MultiKueueConfig) -> Verdict:
        """Kueue's ``reconcileGroup`` for one Workload that holds quota; returns the check's verdict."""
        key = (wl["metadata"]["namespace"], wl["metadata"]["name"])
        current = find_state(wl, check)
        state = str((current or {}).get("state") or PENDING)
        adapter, objects, problem = await self._owner(wl)
        if problem is not None:
            return Rejected(problem)
        if adapter is None or not objects:  # not in the cache yet, or being deleted: decide nothing now
            return _unchanged(current) if state == READY else Pending("waiting for the Workload's Job")
        job = _Owned(adapter, objects)
        status = wl.get("status") or {}
        # An elastic job's new slice goes where the job runs: the worker of the slice it replaces.
        runs_on = await self._elastic_worker(wl)
        known = list(dict.fromkeys([*config.clusters, *([status["clusterName"]] if status.get("clusterName")
                                                         else []), *([runs_on] if runs_on else [])]))
        connected = self._connected(known)
        if not runs_on and replaced_slice(wl) is not None:
            # The slice it replaces never recorded a worker (scaled up as it was being admitted):
            # the job's copy, where one is, still says where the job may run.
            runs_on = self._holding_copy(job, connected)
        remotes: dict[str, Obj] = {}
        for cluster in connected:  # as the worker's watch has them: a change re-queues this Workload
            remote = self.workers[cluster].cached(WORKLOADS, *key)
            if remote is not None:
                remotes[cluster] = remote

        for cluster, remote in remotes.items():  # a finished remote finishes the local Workload
            if is_true(remote, "Finished"):
                await self._sync_job(connected[cluster], job, wl, remote_finished=True)
                await self._finish_local(wl, find_condition(remote, "Finished") or {})
                return _unchanged(current)

        for cluster, remote in list(remotes.items()):  # evicted on the worker: start over
            if not is_true(remote, "Evicted"):
                continue
            if state == READY:
                message = (f'Workload evicted on worker cluster: "{cluster}", resetting for re-admission. '
                           f'Previously: "{READY}"')
                self._view().events.emit(wl, NORMAL, "MultiKueue", message)  # as Kueue says it
                return Retry(message)
            await self._delete_remote(connected[cluster], key, job)  # left from an earlier attempt
            del remotes[cluster]
            if self._winners.get(key) == cluster:
                self._winners.pop(key, None)

        for cluster, remote in list(remotes.items()):  # stale copies go; they are made again below
            if not same_spec(wl, remote):
                shrunk = scaled_down_copy(wl, remote)
                if shrunk is not None:  # an elastic job scaled down: its copy follows, as it runs
                    await connected[cluster].patch(WORKLOADS, *key, shrunk)
                    continue
                await self._delete_remote(connected[cluster], key, job)
                del remotes[cluster]

        pinned = self._pinned(key, state, status, remotes, connected)
        if pinned:
            # The winner is chosen: a worker back from a partition with a copy it admitted
            # meanwhile (or earlier) never displaces it; such a copy is stale and goes.
            for cluster in [c for c in remotes if c != pinned]:
                await self._delete_remote(connected[cluster], key, job)
                del remotes[cluster]
            if pinned not in connected and state != READY:  # out of reach before Ready was written
                return self._admitted_elsewhere(wl, current, connected, pinned)
        admitted = sorted((at, cluster) for cluster, remote in remotes.items()
                          if (at := admitted_at(remote)) is not None)
        if admitted:
            winner = admitted[0][1]
            self._winners[key] = winner  # from now on, until a reset: its Job may be running there
            await _on_every_worker(
                self._delete_remote(connected[cluster], key, job) for cluster in remotes if cluster != winner)
            await self._sync_job(connected[winner], job, wl, remote_finished=False)
            message = f'The workload was admitted on "{winner}"'
            # Once per admission (evaluate runs again after this): a new slice of an elastic job
            # has its worker recorded from its dispatch on, and is admitted when it turns Ready.
            if status.get("clusterName") != winner or (replaced_slice(wl) is not None and state != READY):
                self._view().events.emit(wl, NORMAL, "MultiKueue", message)
                self.metrics.admitted.labels(_cluster_queue(wl), winner).inc()
            self._rounds.pop(key, None)
            # The winner and the end of the nomination land with the verdict, in one write.
            return Ready(message, status={"clusterName": winner, "nominatedClusterNames": None})

        if state == READY:
            return self._admitted_elsewhere(wl, current, connected)

        if state == RETRY:
            # Kueue's "skip nomination while the check is not yet Pending": the eviction the Retry
            # asked for resets it to Pending; a verdict written before that would undo the retry.
            return _unchanged(current)

        # Pending: nominate and dispatch, once every other check is Ready.
        others = [e for e in status.get("admissionChecks") or [] if e.get("name") != check]
        if any(e.get("state") != READY for e in others):
            return Pending("waiting for the other admission checks to be ready")
        if runs_on:
            # Never a new nomination: the slice goes only where the job runs (Kueue: "new workload
            # slices will continue to be assigned to the same cluster"), recorded on it with the
            # verdict (as Kueue's scheduler copies it when the slice reserves quota), connected or not.
            if runs_on not in connected:
                return Pending(f'waiting for worker cluster "{runs_on}", where the elastic job runs, '
                               "to be connected", status={"clusterName": runs_on})
            nominated = [runs_on]
        else:
            nominated = self._nominate(wl, config, connected)
        if not nominated:
            if self.settings.dispatcher not in (ALL_AT_ONCE, INCREMENTAL):
                return Pending(f"waiting for {self.settings.dispatcher} to nominate "
                               "connected worker clusters")
            return Pending("no worker cluster is connected")
        for cluster in sorted(set(remotes) - set(nominated)):
            await self._delete_remote(connected[cluster], key, job)
        fresh = [cluster for cluster in nominated if cluster not in remotes]
        copy_ = remote_workload(wl, self.settings.origin)
        created = await _on_every_worker(_create_or_keep(connected[c], WORKLOADS, copy_) for c in fresh)
        for cluster, outcome in zip(fresh, created, strict=True):
            if outcome is True:
                self.metrics.dispatched.labels(_cluster_queue(wl), cluster).inc()
        if runs_on:
            return Pending(f'dispatched to {runs_on}, where the elastic job runs; waiting for it to admit '
                           "the new slice", status={"clusterName": runs_on})
        # The nomination lands with the verdict, in one write (a clusterName left over from
        # before an eviction goes with it).
        return Pending(f"dispatched to {', '.join(nominated)}; waiting for a worker to admit it",
                       status={"nominatedClusterNames": nominated, "clusterName": None})

    async def _elastic_worker(self, wl: Obj) -> str:
        """Where an elastic Workload's job runs: its own ``clusterName``, else (a new slice) that of
        the slice it replaces, or the worker this check chose for it; "" for any other Workload."""
        if not is_elastic(wl):
            return ""
        own = str((wl.get("status") or {}).get("clusterName") or "")
        old_key = replaced_slice(wl)
        if own or old_key is None:
            return own
        view = self._view()
        old = view.get(WORKLOADS, *old_key) or await view.api.get_or_none(WORKLOADS, *old_key) or {}
        return str((old.get("status") or {}).get("clusterName") or self._winners.get(old_key, ""))

    def _holding_copy(self, job: _Owned, connected: Mapping[str, Client]) -> str:
        """The first connected worker whose watch shows our copy of the job, or ""."""
        kind, local = job.adapter.resource, job.objects[0]
        namespace, name = local["metadata"]["namespace"], local["metadata"]["name"]
        for cluster in sorted(connected):
            worker = self.workers[cluster]
            if worker.watches(kind) and worker.cached(kind, namespace, name) is not None:
                return cluster
        return ""

    def _nominate(self, wl: Obj, config: MultiKueueConfig, connected: dict[str, Client]) -> list[str]:
        """The clusters to hold a copy, per the dispatcher (kueue-contract.md §7, step 7)."""
        usable = [c for c in config.clusters if c in connected]
        dispatcher = self.settings.dispatcher
        if dispatcher == ALL_AT_ONCE:
            return sorted(usable)
        previous = [str(c) for c in (wl.get("status") or {}).get("nominatedClusterNames") or []]
        if dispatcher != INCREMENTAL:  # an external dispatcher nominates; we follow
            return [c for c in previous if c in connected]
        key = (wl["metadata"]["namespace"], wl["metadata"]["name"])
        loop_now = asyncio.get_running_loop().time()
        started = self._rounds.get(key)
        kept = [c for c in previous if c in config.clusters]
        if started is None or loop_now - started >= self.settings.incremental_round or not kept:
            fresh = [c for c in usable if c not in kept][: self.settings.incremental_step]
            if fresh or started is None:
                kept += fresh
                self._rounds[key] = loop_now
        if len([c for c in usable if c not in kept]):
            self._view().requeue(*key, self.settings.incremental_round)
        return [c for c in kept if c in connected]

    def _pinned(self, key: tuple[str, str], state: str, status: Obj, remotes: dict[str, Obj],
                connected: dict[str, Client]) -> str:
        """The worker chosen to run the Workload, or "" while none is.

        Chosen means its Job may have been created there: from the moment this check picks it
        (kept in memory, as the Ready state and ``status.clusterName`` that record it reach the
        API and the cache a little later), or as recorded (a Ready check, or a recorded worker
        whose copy is still admitted: a restart between the pick and the Ready write).
        """
        recorded = str(status.get("clusterName") or "")
        if state == READY and recorded:
            return recorded
        pinned = self._winners.get(key, "")
        if not pinned and recorded and admitted_at(remotes.get(recorded) or {}) is not None:
            pinned = recorded
        if pinned and pinned in connected and admitted_at(remotes.get(pinned) or {}) is None:
            self._winners.pop(key, None)  # its copy is gone or evicted: the Workload starts over
            return ""
        return pinned

    def _admitted_elsewhere(self, wl: Obj, current: Obj | None, connected: dict[str, Client],
                            cluster: str | None = None) -> Verdict:
        """A chosen worker that shows no admitted copy: lost (wait for it), or gone."""
        cluster = cluster or str((wl.get("status") or {}).get("clusterName") or "")
        if cluster and cluster not in connected:
            worker = self.workers.get(cluster)
            now = time.time()
            # Lost since the connection failed, or since this check first missed it (a restarted
            # manager still connecting, a kubeconfig gone): as Kueue, it waits the full timeout.
            noticed = self._unreachable_since.setdefault(cluster, now)
            lost = worker.lost_since if worker is not None and worker.lost_since is not None else noticed
            if now - lost < self.settings.worker_lost_timeout:
                wait = self.settings.worker_lost_timeout - (now - lost)
                self._view().requeue(*_key(wl), max(wait, 0.0) + 0.1)
                return _unchanged(current)
            return Retry("Admitting remote lost")
        return Retry("Admitting remote no longer exists")

    async def _sync_job(self, api: Client, job: _Owned, wl: Obj, *, remote_finished: bool) -> None:
        """Create the job's objects on the winner, or copy their status to the manager's (Kueue's
        SyncJob), resizing the copy of an elastic job scaled on the manager."""
        adapter = job.adapter
        workload_name = str(wl["metadata"]["name"])
        for local in job.objects:
            namespace, name = local["metadata"]["namespace"], local["metadata"]["name"]
            worker = next((w for w in self.workers.values() if w.api is api), None)
            if worker is not None and worker.watches(adapter.resource):
                remote = worker.cached(adapter.resource, namespace, name)
            else:
                remote = await api.get_or_none(adapter.resource, namespace, name)
            if remote is None:
                if not remote_finished:
                    copy_ = adapter.remote_object(local, wl["metadata"]["name"], self.settings.origin)
                    if worker is not None:
                        self._jobs_created.add((worker.name, adapter.resource, namespace, name))
                    await _create_or_keep(api, adapter.resource, copy_)
                continue
            now_named = job_workload_name(adapter.resource.kind, adapter.resource.group, local)
            resized = None if remote_finished else adapter.resized(local, remote, workload_name, now_named)
            if resized is not None:  # a merge patch, as Kueue's (the worker's user needs no update)
                await api.patch(adapter.resource, namespace, name, merge_patch(remote, resized))
            status = adapter.status_to_copy(local, remote)
            if status is None:
                note = adapter.deferred_status(local, time.time())
                if note is not None:
                    await self._patch_local_status(adapter.resource, local, note)
                self._view().requeue(*_key(wl), JOB_SYNC_DEFERRED_SECONDS)
                continue
            current = local.get("status") or {}
            if status and status != current:
                # A copy, not a merge: what only the local status has (the deferred-sync note) goes.
                body = {**{key: None for key in current if key not in status}, **status}
                await self._patch_local_status(adapter.resource, local, body)

    async def _finish_local(self, wl: Obj, remote_finished: Obj) -> None:
        if is_true(wl, "Finished"):
            return
        reason = str(remote_finished.get("reason") or "Succeeded")
        message = str(remote_finished.get("message") or "")
        await _set_condition(self._view().api, WORKLOADS, wl, FINISHED, "True", reason, message)

    # -- remote removal

    async def _delete_remote(self, api: Client, key: tuple[str, str], job: _Owned | None) -> None:
        """The job's objects first (only ours), then the Workload, as Kueue removes them."""
        namespace, name = key
        if job is not None and job.adapter.group_selector(job.objects[0]) is None:
            owner = str(job.objects[0]["metadata"]["name"])
            await self._delete_owned(api, job.adapter.resource, namespace, owner, name)
        else:  # a pod group, or an owner we no longer know: find our copies by their labels
            kinds = [job.adapter.resource] if job is not None else self._served(api)
            for kind in kinds:
                for remote in await self._remote_objects(api, kind, namespace, name):
                    await api.delete(kind, namespace, remote["metadata"]["name"],
                                     propagation_policy="Background", missing_ok=True)
        # Delete, then drop the finalizers of a copy the deletion left terminating (the worker's
        # Kueue keeps one on Workloads): one request for a copy without, none wasted on a read.
        remote_wl = await api.delete(WORKLOADS, namespace, name, missing_ok=True)
        if remote_wl is not None and (remote_wl.get("metadata") or {}).get("finalizers"):
            with contextlib.suppress(NotFound):
                await api.patch(WORKLOADS, namespace, name, {"metadata": {"finalizers": None}})

    async def _delete_owned(
        self, api: Client, kind: Resource, namespace: str, name: str, workload: str
    ) -> None:
        """Kueue's ``DeleteRemoteObjectIfOwned``: the remote object goes only if it is our copy."""
        worker = next((w for w in self.workers.values() if w.api is api), None)
        made = (worker.name if worker is not None else "", kind, namespace, name)
        if worker is not None and worker.watches(kind):
            # The worker's watch sees every copy of ours; one it has not shown yet can only be a
            # create of this check's still on its way (remembered until the watch shows it).
            remote = worker.cached(kind, namespace, name)
            if remote is not None:
                self._jobs_created.discard(made)
            elif made in self._jobs_created:
                remote = await api.get_or_none(kind, namespace, name)
        else:
            remote = await api.get_or_none(kind, namespace, name)
        if remote is None:
            return
        labels = remote["metadata"].get("labels") or {}
        ours = labels.get(ORIGIN_LABEL) == self.settings.origin
        if not ours or local_workload_of(remote) not in (None, workload):
            return
        # Gone (404) or replaced (409, the uid precondition) meanwhile: not ours any more. Any other
        # failure (an unreachable worker) must fail the evaluation: a copy left behind could run later.
        with contextlib.suppress(NotFound, Conflict):
            await api.delete(kind, namespace, name, propagation_policy="Background",
                             uid=str(remote["metadata"].get("uid") or "") or None)

    async def _remote_objects(self, api: Client, kind: Resource, namespace: str, workload: str) -> list[Obj]:
        """Our copies of ``kind`` on a worker that belong to the manager Workload ``workload``."""
        selector = f"{ORIGIN_LABEL}={self.settings.origin}"
        if len(workload) <= 63:
            selector += f",{PREBUILT_WORKLOAD}={workload}"
        try:
            listed = await api.list(kind, namespace, label_selector=selector)
        except NotFound:  # the worker does not serve the kind
            return []
        return [o for o in listed.get("items") or [] if local_workload_of(o) == workload]

    def _served(self, api: Client) -> list[Resource]:
        worker = next((w for w in self.workers.values() if w.api is api), None)
        return list(worker.served) if worker is not None else list(self._job_kinds())

    async def _delete_remotes(self, key: tuple[str, str], clusters: Iterable[str], keep: str | None) -> None:
        for cluster, api in self._connected(clusters).items():
            if cluster == keep:
                continue
            try:
                await self._delete_remote(api, key, None)
            except UNREACHABLE as exc:  # garbage collection removes them once it is back
                self.workers[cluster].report_failure(exc)

    async def _collect_garbage(self) -> None:
        """Every ``gc_interval``: remote copies whose manager Workload is gone or being deleted go too."""
        while True:
            await asyncio.sleep(self.settings.gc_interval)
            try:
                await self.collect_garbage()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("MultiKueue garbage collection failed: %s", exc)

    async def collect_garbage(self) -> int:
        """One pass over the connected workers; returns how many remote Workloads were removed.

        The cache only proposes: the manager's API confirms that a Workload is gone before its
        copies go, so a stale cache (a runner stopped when leadership moved) never removes the
        copies of a Workload that exists.
        """
        removed = 0
        for _cluster, api in self._connected(sorted(self.workers)).items():
            listed = await api.list(WORKLOADS, label_selector=f"{ORIGIN_LABEL}={self.settings.origin}")
            for remote in listed.get("items") or []:
                key = (remote["metadata"]["namespace"], remote["metadata"]["name"])
                if await self._gone_locally(*key):
                    async with self._lock(key):
                        await self._delete_remote(api, key, None)
                    removed += 1
            # Job objects of ours whose Workload went first (a deletion cut short) go as well.
            for kind in self._served(api):
                listed_jobs = await api.list(kind, label_selector=f"{ORIGIN_LABEL}={self.settings.origin}")
                for remote_obj in listed_jobs.get("items") or []:
                    meta = remote_obj["metadata"]
                    workload = local_workload_of(remote_obj)
                    if workload is None or await self._gone_locally(meta["namespace"], workload):
                        await api.delete(kind, meta["namespace"], meta["name"],
                                         propagation_policy="Background", missing_ok=True)
        return removed

    async def _gone_locally(self, namespace: str, name: str) -> bool:
        view = self._view()
        cached = view.get(WORKLOADS, namespace, name)
        if cached is not None and not cached["metadata"].get("deletionTimestamp"):
            return False
        local = await view.api.get_or_none(WORKLOADS, namespace, name)
        return local is None or bool(local["metadata"].get("deletionTimestamp"))


T = TypeVar("T")


async def _on_every_worker(calls: Iterable[Awaitable[T]]) -> list[T]:
    """Run one call per worker at once (each is a cluster of its own, waiting on nothing but its
    API server); a failure fails the evaluation once the others are done."""
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    failure = next((o for o in outcomes if isinstance(o, BaseException)), None)
    if failure is not None:
        raise failure
    return [o for o in outcomes if not isinstance(o, BaseException)]


async def _create_or_keep(api: Client, kind: Resource, obj: Obj) -> bool:
    """Create ``obj``; True if it was created, False if it already existed."""
    try:
        await api.create(kind, obj)
    except ApiError as exc:
        if not exc.already_exists:
            raise
        return False
    return True


def _cluster_queue(wl: Obj) -> str:
    return str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


def _unchanged(current: Obj | None) -> Verdict:
    """The verdict that leaves the check as it is."""
    state = (current or {}).get("state") or PENDING
    message = str((current or {}).get("message") or "")
    if state == READY:
        return Ready(message)
    if state == REJECTED:
        return Rejected(message or "rejected")
    if state == RETRY:
        after = (current or {}).get("requeueAfterSeconds")
        return Retry(message, after=float(after) if after is not None else None)
    return Pending(message)


def _backoff(failures: int) -> float:
    return float(min(0.5 * 2 ** (failures - 1), 30.0))


async def _set_condition(api: Client, kind: Resource, obj: Obj, condition: str, value: str, reason: str,
                         message: str) -> None:
    """Set one condition through the status subresource (re-read and redone after a conflict);
    an object already deleted needs none."""
    generation = (obj.get("metadata") or {}).get("generation") if kind != WORKLOADS else None

    def change(status: Obj) -> bool:
        return set_condition(status, condition, value, reason, message, time.time(),
                             observed_generation=generation)

    with contextlib.suppress(NotFound):
        await update_status(api, kind, obj, change)


@dataclass(frozen=True)
class _Owned:
    """A Workload's job as MultiKueue dispatches it: its adapter and its local objects (owner first)."""

    adapter: MultiKueueAdapter
    objects: list[Obj]


def _key(wl: Obj) -> tuple[str, str]:
    return wl["metadata"]["namespace"], wl["metadata"]["name"]
