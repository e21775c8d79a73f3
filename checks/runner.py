"""The runner: everything about an admission check except the verdict.

For every AdmissionCheck whose ``spec.controllerName`` a plugin owns, the runner keeps the
``Active`` condition current (resolving ``spec.parameters``), and for every Workload that holds a
quota reservation in a ClusterQueue using such a check (``admissionChecksStrategy``, honouring
``onFlavors``) it asks the plugin for a verdict and writes the check's entry of
``status.admissionChecks`` — level-triggered, on every relevant change and on timers.

Writes are PUTs of the ``status`` subresource guarded by the resourceVersion that was read: a
concurrent writer (Kueue, another check controller) makes the write fail with 409, and the
runner reads the workload again and evaluates afresh, so nobody's entry is ever lost. A key is
never evaluated twice at once (see :mod:`kadmit.kube.workqueue`); ``max_concurrency`` workers bound
the work in flight; each plugin call has a timeout, and a plugin that raises or times out yields
``Pending`` with the error in the message — never ``Ready``, never a dead runner.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kadmit.checks import events
from kadmit.checks.metrics import CheckMetrics
from kadmit.checks.plugin import (
    ActiveCondition,
    ActiveContext,
    AdmissionCheckPlugin,
    AnyPlugin,
    CheckContext,
    ClusterView,
    ParametersError,
)
from kadmit.checks.state import new_state, same_entry, should_evaluate
from kadmit.checks.verdict import Pending, Ready, Verdict
from kadmit.engine.model import WorkloadKey
from kadmit.kube import (
    NORMAL,
    ApiError,
    Client,
    Conflict,
    EventRecorder,
    Obj,
    Resource,
    Workers,
    cancel_all,
    copy_object,
)
from kadmit.kube.informer import DELETED, Informer
from kadmit.kube.pipeline import LastWritten
from kadmit.kube.ratelimit import Pace
from kadmit.kube.resources import ADMISSION_CHECKS, CLUSTER_QUEUES, WORKLOADS
from kadmit.workload import (
    ACTIVE,
    applicable_checks,
    check_states,
    cluster_queue_of,
    find_state,
    holds_reservation,
    merge_states,
    set_condition,
)

logger = logging.getLogger(__name__)

QueueKey = tuple[str, str | None, str]
"""``("workload", namespace, name)`` or ``("check", None, name)``."""
WatchFactory = Callable[[Resource, str | None], Awaitable[Informer]]
"""A started, shared informer of a resource, cluster-wide or in one namespace
(:meth:`kadmit.kube.Informers.watch` is one)."""

NOT_ACTIVE_MESSAGE = "the check is not active"
ACTIVE_MESSAGE = "The admission check is active"
BAD_PARAMETERS = "BadParametersRef"
MAX_CONFLICT_RETRIES = 5
DEFAULT_MAX_CONCURRENCY = 32
"""Workloads evaluated at once. An evaluation mostly waits on the API (MultiKueue's: a create on
every worker, then deletes and the job's copy), so more at once costs little CPU: at 8,
bench/multikueue.py's Workloads waited 8 s for their first evaluation (16 Workloads/s); at 32,
0.2 s (25/s)."""


@dataclass
class _Tracked:
    """A workload some plugins evaluated: they are released when it stops needing them."""

    last_seen: Obj
    plugins: set[str]


class CheckRunner:
    """Runs check plugins against any cluster that serves the Kueue API.

    ``watches`` returns a started, shared informer for a resource (:meth:`kadmit.kube.Informers.watch`);
    the runner reads Workloads, ClusterQueues, AdmissionChecks, each plugin's parameters kind and
    the kinds its plugins declare, and never starts or stops these caches itself. ``clock`` gives
    POSIX seconds; plugins see it as ``context.now``, an aware datetime. ``on_evaluated(workload,
    entry)`` is told every check entry an evaluation produced, changed or not, so that a test can
    tell "decided Pending" from "not asked yet" (:mod:`kadmit.checks.testing` waits on it).
    """

    def __init__(
        self,
        client: Client,
        plugins: Sequence[AnyPlugin],
        *,
        watches: WatchFactory,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        call_timeout: float = 10.0,
        resync_period: float = 300.0,
        error_backoff_initial: float = 0.5,
        error_backoff_max: float = 60.0,
        clock: Callable[[], float] = time.time,
        metrics: CheckMetrics | None = None,
        on_evaluated: Callable[[Obj, Obj], None] | None = None,
        event_pace: Pace | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self._plugins: dict[str, AnyPlugin] = {}
        for plugin in plugins:
            name = getattr(plugin, "controller_name", "")
            if not name:
                raise ValueError(f"{type(plugin).__name__} has no controller_name")
            if name in self._plugins:
                raise ValueError(f"two plugins claim controllerName {name!r}")
            self._plugins[name] = plugin
        self.api = client
        # One recorder for the runner and its plugins' view; ``event_pace``: the budget it shares
        # with the process's other recorders (kadmit run's controllers), its own when None.
        self.events = EventRecorder(client, events.COMPONENT, pace=event_pace)
        self._watch_factory = watches
        self._call_timeout = call_timeout
        self._resync_period = resync_period
        self._backoff_max = error_backoff_max
        self._clock = clock
        self._on_evaluated = on_evaluated
        self.metrics = metrics or CheckMetrics()
        self._workers: Workers[QueueKey] = Workers(
            "checks-worker", self._sync, count=max_concurrency,
            base_delay=error_backoff_initial, max_delay=error_backoff_max)
        self._watches: dict[Resource, Informer] = {}
        self._last_written = LastWritten(
            lambda namespace, name: self._watches[WORKLOADS].get(namespace, name))
        self._tasks: list[asyncio.Task[None]] = []
        self._tracked: dict[WorkloadKey, _Tracked] = {}
        self._params_cache: dict[tuple[str, str, str], Any] = {}
        self._deleted: dict[WorkloadKey, Obj] = {}  # last state of deleted workloads, until released
        # plugins already released from a workload since they last evaluated it: a finished
        # workload keeps its check entries, and each later event must not release it again
        self._released: dict[WorkloadKey, set[str]] = {}
        self._stopped = False
        self._started_plugins: list[AnyPlugin] = []
        self.cluster = ClusterView(self._watches, self.api, self._requeue_workload, self.events)
        self.writes = 0  # status writes that succeeded (checks and AdmissionChecks)
        self.conflicts = 0  # writes that met a 409 and were redone

    @property
    def controller_names(self) -> list[str]:
        return sorted(self._plugins)

    # -- lifecycle

    def required_watches(self) -> list[tuple[Resource, str | None]]:
        """Every resource the runner and its plugins watch, and where (the cluster must serve them all)."""
        return required_watches(self._plugins.values())

    async def start(self) -> None:
        """Get the watches, wait until they are synced, evaluate everything once, then follow changes."""
        for resource, namespace in self.required_watches():
            if resource not in self._watches:
                self._watches[resource] = await self._watch_factory(resource, namespace)
        self._watches[WORKLOADS].add_handler(self._on_workload)
        self._watches[CLUSTER_QUEUES].add_handler(self._on_cluster_queue)
        self._watches[ADMISSION_CHECKS].add_handler(self._on_admission_check)
        for kind in self._watches:
            base = kind in (WORKLOADS, CLUSTER_QUEUES, ADMISSION_CHECKS)
            if base and not any(kind in plugin.watches for plugin in self._plugins.values()):
                continue
            self._watches[kind].add_handler(self._dependency_handler(kind))
        await asyncio.gather(*(watch.wait_synced() for watch in self._watches.values()))
        started = self._started_plugins
        try:
            for plugin in self._plugins.values():
                await plugin.start(self.cluster)
                started.append(plugin)
        except BaseException:
            self._started_plugins = []
            await self._stop_plugins(started)
            raise
        await self._workers.start()
        self._enqueue_everything()
        self._tasks.append(asyncio.create_task(self._resync(), name="checks-resync"))
        logger.info("admission-check runner started for %s", ", ".join(self.controller_names))

    async def stop(self) -> None:
        """Stop evaluating, then stop the plugins, then write the Events they and the runner told
        (as the manager's stop does: none is left to die with the client). Shared watches cannot
        drop handlers, so ours go quiet."""
        self._stopped = True
        await self._workers.stop()
        await cancel_all(self._tasks)
        started, self._started_plugins = self._started_plugins, []
        await self._stop_plugins(started)
        await self.events.drain()

    async def _stop_plugins(self, plugins: Sequence[AnyPlugin]) -> None:
        for plugin in reversed(plugins):
            try:
                async with asyncio.timeout(self._call_timeout):
                    await plugin.stop()
            except asyncio.CancelledError:
                raise
            except Exception:  # one plugin failing to stop must not keep the others running
                logger.exception("stopping %s failed", plugin.controller_name)

    # -- events → keys

    def _requeue_workload(self, namespace: str, name: str, after: float) -> None:
        if not self._stopped:
            self._workers.queue.add_after(("workload", namespace, name), after)

    def _enqueue_everything(self) -> None:
        for ac in self._watches[ADMISSION_CHECKS].list():
            self._workers.queue.add(("check", None, ac["metadata"]["name"]))
        for wl in self._watches[WORKLOADS].list():
            self._workers.queue.add(("workload", wl["metadata"]["namespace"], wl["metadata"]["name"]))

    def _on_workload(self, event: str, obj: Obj, old: Obj | None) -> None:
        if self._stopped:
            return
        if event == DELETED:
            self._deleted[WorkloadKey(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
        self._workers.queue.add(("workload", obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def _enqueue_workloads(self, keep: Callable[[Obj], bool]) -> None:
        for wl in self._watches[WORKLOADS].list():
            if keep(wl):
                self._workers.queue.add(("workload", wl["metadata"]["namespace"], wl["metadata"]["name"]))

    def _on_cluster_queue(self, event: str, obj: Obj, old: Obj | None) -> None:
        if self._stopped:
            return
        if old is not None and event != DELETED and old.get("spec") == obj.get("spec"):
            return  # a status update (usage, counts): nothing a check reads
        name = obj["metadata"]["name"]
        self._enqueue_workloads(lambda wl: cluster_queue_of(wl) == name)

    def _on_admission_check(self, event: str, obj: Obj, old: Obj | None) -> None:
        if self._stopped:
            return
        name = obj["metadata"]["name"]
        self._workers.queue.add(("check", None, name))
        if old is not None and event != DELETED and old.get("spec") == obj.get("spec"):
            return  # our own Active condition, most likely
        self._enqueue_workloads_of_check(name)

    def _enqueue_workloads_of_check(self, check: str) -> None:
        cluster_queues = {
            cq["metadata"]["name"]
            for cq in self._watches[CLUSTER_QUEUES].list()
            if any(e.get("name") == check for e in
                   ((cq.get("spec") or {}).get("admissionChecksStrategy") or {}).get("admissionChecks") or [])
        }
        self._enqueue_workloads(
            lambda wl: cluster_queue_of(wl) in cluster_queues
            or any(e.get("name") == check for e in check_states(wl))
        )

    def _dependency_handler(self, kind: Resource) -> Callable[[str, Obj, Obj | None], None]:
        def handle(event: str, obj: Obj, old: Obj | None) -> None:
            if self._stopped:
                return
            for controller_name, plugin in self._plugins.items():
                if plugin.parameters_kind == kind:
                    name = obj["metadata"]["name"]
                    for ac in self._watches[ADMISSION_CHECKS].list():
                        spec = ac.get("spec") or {}
                        if spec.get("controllerName") == controller_name and \
                                (spec.get("parameters") or {}).get("name") == name:
                            self._workers.queue.add(("check", None, ac["metadata"]["name"]))
                            self._enqueue_workloads_of_check(ac["metadata"]["name"])
                if kind not in plugin.watches or plugin not in self._started_plugins:
                    continue  # not started yet: what changed until then is evaluated once it has
                if _judges_activity(plugin):
                    for ac in self._watches[ADMISSION_CHECKS].list():
                        if (ac.get("spec") or {}).get("controllerName") == controller_name:
                            self._workers.queue.add(("check", None, ac["metadata"]["name"]))
                try:
                    keys = plugin.affected(kind, obj, self.cluster)
                except Exception:  # a plugin bug: fall back to the broad default, keep the others going
                    logger.exception("%s.affected failed on %s %s", type(plugin).__name__, kind,
                                     obj["metadata"].get("name"))
                    keys = None
                if keys is not None:
                    for namespace, wl_name in keys:
                        self._workers.queue.add(("workload", namespace, wl_name))
                    continue
                scope = obj["metadata"].get("namespace") if kind.namespaced else None
                self._enqueue_workloads(_reserved_in(scope))
        return handle

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self._resync_period)
            self._enqueue_everything()

    # -- workers

    async def _sync(self, key: QueueKey) -> None:
        if key[0] == "check":
            await self._sync_admission_check(key[2])
        else:
            assert key[1] is not None
            await self._sync_workload(key[1], key[2])

    # -- AdmissionCheck: the Active condition

    def _parameters(self, ac: Obj, plugin: AnyPlugin) -> tuple[Any, str | None]:
        """The plugin's parsed parameters for ``ac``, or the reason they cannot be had."""
        kind = plugin.parameters_kind
        if kind is None:
            return None, None
        ref = (ac.get("spec") or {}).get("parameters")
        if not ref:
            return None, "missing parameters reference"
        if ref.get("apiGroup") != kind.group or ref.get("kind") != kind.kind or not ref.get("name"):
            return None, (f"wrong group or kind {ref.get('apiGroup')}/{ref.get('kind')}, expected "
                          f"{kind.group}/{kind.kind}: bad parameters reference")
        obj = self._watches[kind].get(None, str(ref["name"]))
        if obj is None:
            return None, f'{kind.plural}.{kind.group} "{ref["name"]}" not found'
        meta = obj["metadata"]
        cache_key = (str(kind), str(meta.get("uid", meta["name"])), str(meta.get("resourceVersion", "")))
        if cache_key in self._params_cache:
            return self._params_cache[cache_key], None
        try:
            parsed = plugin.parse_parameters(obj)
        except ParametersError as exc:
            return None, f"{kind.kind} {meta['name']}: {exc}"
        if len(self._params_cache) > 1024:
            self._params_cache.clear()
        self._params_cache[cache_key] = parsed
        return parsed, None

    async def _sync_admission_check(self, name: str) -> None:
        ac = self._watches[ADMISSION_CHECKS].get(None, name)
        for _ in range(MAX_CONFLICT_RETRIES):
            if ac is None:
                return
            plugin = self._plugins.get(str((ac.get("spec") or {}).get("controllerName", "")))
            if plugin is None:
                return
            cond = await self._active_condition(ac, plugin)
            updated = copy_object(ac)
            generation = (updated.get("metadata") or {}).get("generation")
            status = updated.setdefault("status", {})
            if not set_condition(status, cond["type"], cond["status"], cond["reason"], cond["message"],
                                 self._clock(), observed_generation=generation):
                return
            try:
                await self.api.replace(ADMISSION_CHECKS, updated, subresource="status")
                self._count_write()
                return
            except ApiError as exc:
                if not exc.conflict:
                    raise
                self._count_conflict()
                ac = await self._fresh(ADMISSION_CHECKS, None, name)
        raise Conflict(409, "Conflict",
                       f"AdmissionCheck {name}: still conflicting after {MAX_CONFLICT_RETRIES} writes")

    async def _active_condition(self, ac: Obj, plugin: AnyPlugin) -> Obj:
        """The plugin's judgement if it gives one, else Active unless the parameters are bad."""
        parameters, problem = self._parameters(ac, plugin)
        judged: ActiveCondition | None = None
        if _judges_activity(plugin):
            context: ActiveContext[Any] = ActiveContext(
                check_name=ac["metadata"]["name"], parameters=parameters, problem=problem,
                now=_aware(self._clock()), cluster=self.cluster)
            async with asyncio.timeout(self._call_timeout):
                judged = await plugin.active_condition(ac, context)
            if judged is not None and not isinstance(judged, ActiveCondition):
                raise TypeError(f"{type(plugin).__name__}.active_condition returned "
                                f"{type(judged).__name__}, not an ActiveCondition")
        if judged is not None:
            return {"type": ACTIVE, "status": "True" if judged.active else "False",
                    "reason": judged.reason, "message": judged.message}
        if problem is None:
            return {"type": ACTIVE, "status": "True", "reason": "Active", "message": ACTIVE_MESSAGE}
        return {"type": ACTIVE, "status": "False", "reason": BAD_PARAMETERS, "message": problem}

    # -- Workload: the check states

    async def _sync_workload(self, namespace: str, name: str) -> None:
        wl = self._last_written.latest((namespace, name))
        for _ in range(MAX_CONFLICT_RETRIES):
            if wl is None:
                key = WorkloadKey(namespace, name)
                await self._release(key, set())
                self._deleted.pop(key, None)
                self._released.pop(key, None)
                return
            entries, fields = await self._evaluate(wl)
            if not entries and not fields:
                return
            updated = copy_object(wl)
            status = updated.setdefault("status", {})
            for field, value in fields.items():  # the checks' own fields, in the same write
                if value is None:
                    status.pop(field, None)
                else:
                    status[field] = value
            if entries:
                status["admissionChecks"] = merge_states(wl, entries)
            try:
                written = await self.api.replace(WORKLOADS, updated, subresource="status")
            except ApiError as exc:
                if exc.not_found:
                    wl = None
                    continue
                if not exc.conflict:
                    raise
                self._count_conflict()
                wl = await self._fresh(WORKLOADS, namespace, name)
                continue
            self._count_write()
            self._last_written.remember((namespace, name), written)
            for entry in entries:
                previous = (find_state(wl, entry["name"]) or {}).get("state") or "Pending"
                if previous != entry["state"] and self._state_events(entry["name"]):
                    message = events.check_updated_message(entry["name"], previous, entry["state"],
                                                           entry.get("message", ""))
                    self.events.emit(wl, NORMAL, "AdmissionCheckUpdated", message)
            return
        raise Conflict(409, "Conflict",
                       f"Workload {namespace}/{name}: conflicting after {MAX_CONFLICT_RETRIES} tries")

    def _check(self, name: str) -> tuple[Obj | None, AnyPlugin | None]:
        """The AdmissionCheck ``name`` as watched, and the plugin of ours that decides it, if any."""
        ac = self._watches[ADMISSION_CHECKS].get(None, name)
        return ac, self._plugins.get(str(((ac or {}).get("spec") or {}).get("controllerName", "")))

    def _state_events(self, check: str) -> bool:
        """Whether the plugin deciding ``check`` wants the runner's AdmissionCheckUpdated Events."""
        plugin = self._check(check)[1]
        return plugin is None or plugin.state_events

    async def _fresh(self, kind: Resource, namespace: str | None, name: str) -> Obj | None:
        try:
            obj = await self.api.get(kind, namespace, name)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        return obj

    async def _evaluate(self, wl: Obj) -> tuple[list[Obj], Obj]:
        """The changed check entries for ``wl``, and the status fields its verdicts change (a
        verdict's ``status``); releases the plugins it no longer needs."""
        key = WorkloadKey(wl["metadata"]["namespace"], wl["metadata"]["name"])
        if not holds_reservation(wl):
            await self._release(key, set(), wl)
            return [], {}
        cq = self._watches[CLUSTER_QUEUES].get(None, cluster_queue_of(wl) or "")
        if cq is not None:
            names = applicable_checks(wl, cq)
        else:  # the ClusterQueue is gone: keep serving the checks Kueue listed
            names = [str(e.get("name")) for e in check_states(wl)]
        owned: list[tuple[str, Obj, AnyPlugin]] = []
        for check in names:
            ac, plugin = self._check(check)
            if ac is not None and plugin is not None:
                owned.append((check, ac, plugin))
        await self._release(key, {plugin.controller_name for _, _, plugin in owned}, wl)
        if not owned:
            return [], {}
        tracked = self._tracked.setdefault(key, _Tracked(wl, set()))
        tracked.last_seen = wl
        entries: list[Obj] = []
        fields: Obj = {}
        status = wl.get("status") or {}
        now = self._clock()
        for check, ac, plugin in owned:
            current = find_state(wl, check)
            if not should_evaluate(current, plugin.reevaluate_ready):
                continue
            tracked.plugins.add(plugin.controller_name)
            if key in self._released:
                self._released[key].discard(plugin.controller_name)
            parameters, problem = self._parameters(ac, plugin)
            if problem is not None:
                verdict: Verdict = Pending(NOT_ACTIVE_MESSAGE)
            else:
                context: CheckContext[Any] = CheckContext(
                    check_name=check, admission_check=ac, state=current, parameters=parameters,
                    now=_aware(now), cluster=self.cluster)
                verdict = await self._call(plugin, check, wl, context)
                verdict = _with_known_pod_sets(verdict, wl, check)
            if isinstance(verdict, Pending) and verdict.recheck_after is not None:
                self._workers.queue.add_after(("workload", key[0], key[1]), verdict.recheck_after)
            entry = new_state(check, current, verdict, now)
            self._tell_evaluated(wl, entry)
            if not same_entry(current, entry):
                entries.append(entry)
            if isinstance(verdict, (Ready, Pending)):
                fields.update((k, v) for k, v in verdict.status.items() if status.get(k) != v)
        return entries, fields

    def _tell_evaluated(self, wl: Obj, entry: Obj) -> None:
        if self._on_evaluated is None:
            return
        try:
            self._on_evaluated(wl, entry)
        except Exception:  # an observer's bug must not stop the verdict from being written
            logger.exception("on_evaluated failed on %s/%s", *_key(wl))

    def _count_write(self) -> None:
        self.writes += 1
        self.metrics.status_writes.labels("written").inc()

    def _count_conflict(self) -> None:
        self.conflicts += 1
        self.metrics.status_writes.labels("conflict").inc()

    async def _call(self, plugin: AnyPlugin, check: str, wl: Obj, context: CheckContext[Any]) -> Verdict:
        verdict = await self._guarded_call(plugin, check, wl, context)
        self.metrics.verdicts.labels(plugin.controller_name, verdict.state).inc()
        return verdict

    async def _guarded_call(
        self, plugin: AnyPlugin, check: str, wl: Obj, context: CheckContext[Any]
    ) -> Verdict:
        controller = plugin.controller_name
        started = time.perf_counter()  # not the loop's clock: uvloop's counts whole milliseconds
        try:
            async with asyncio.timeout(self._call_timeout):
                verdict = await plugin.evaluate(wl, context)
        except TimeoutError:
            logger.warning("check %s timed out on %s/%s", check, *_key(wl))
            self.metrics.plugin_failures.labels(controller, "timeout").inc()
            return Pending(f"check {check} timed out after {self._call_timeout:g}s",
                           recheck_after=self._call_timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("check %s failed on %s/%s", check, *_key(wl))
            self.metrics.plugin_failures.labels(controller, "error").inc()
            return Pending(f"check {check} failed: {_describe(exc)}", recheck_after=self._backoff_max / 4)
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.evaluation_seconds.labels(controller).observe(elapsed)
        if not isinstance(verdict, Verdict):
            self.metrics.plugin_failures.labels(controller, "error").inc()
            return Pending(f"check {check} returned {type(verdict).__name__}, not a verdict")
        return verdict

    def _owners_in_status(self, wl: Obj) -> set[str]:
        """The plugins owning a check listed in ``wl``'s status: after a restart nothing else tells."""
        owners: set[str] = set()
        for entry in check_states(wl):
            ac = self._watches[ADMISSION_CHECKS].get(None, str(entry.get("name", "")))
            controller_name = str(((ac or {}).get("spec") or {}).get("controllerName", ""))
            if controller_name in self._plugins:
                owners.add(controller_name)
        return owners

    async def _release(self, key: WorkloadKey, keep: set[str], wl: Obj | None = None) -> None:
        """Release ``wl`` in the plugins that evaluated it (or own one of its checks), except ``keep``."""
        tracked = self._tracked.get(key)
        last_seen = wl if wl is not None else (tracked.last_seen if tracked else self._deleted.pop(key, None))
        if last_seen is None:
            return
        holders = set(tracked.plugins if tracked else ()) | self._owners_in_status(last_seen)
        released = self._released.get(key, set())
        failed: list[str] = []
        for controller_name in sorted(holders - keep - released):
            if tracked is not None:
                tracked.plugins.discard(controller_name)
            try:
                async with asyncio.timeout(self._call_timeout):
                    await self._plugins[controller_name].release(last_seen, self.cluster)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failed.append(f"{controller_name}: {_describe(exc)}")
                if tracked is not None:
                    tracked.plugins.add(controller_name)  # so that the release is tried again
                continue
            released.add(controller_name)
            self._released[key] = released
        if tracked is not None and not tracked.plugins:
            del self._tracked[key]
        if failed:
            if wl is None and tracked is None:
                self._deleted[key] = last_seen
            raise RuntimeError("release failed: " + "; ".join(failed))


def _with_known_pod_sets(verdict: Verdict, wl: Obj, check: str) -> Verdict:
    """Kueue refuses podSetUpdates naming no pod set of the workload: say so instead of failing the write."""
    if not isinstance(verdict, (Ready, Pending)) or not verdict.pod_set_updates:
        return verdict
    known = {str(ps.get("name", "main")) for ps in (wl.get("spec") or {}).get("podSets") or []}
    unknown = sorted({u.name for u in verdict.pod_set_updates} - known)
    if not unknown:
        return verdict
    return Pending(f"check {check} returned podSetUpdates for unknown pod sets: {', '.join(unknown)}")


def _judges_activity(plugin: AnyPlugin) -> bool:
    """Whether the plugin overrides :meth:`AdmissionCheckPlugin.active_condition`."""
    return type(plugin).active_condition is not AdmissionCheckPlugin.active_condition


def required_watches(plugins: Iterable[AnyPlugin]) -> list[tuple[Resource, str | None]]:
    """Every resource a runner of ``plugins`` watches: Kueue's three, parameters kinds, declared
    watches; each with the namespace to watch it in (None: everywhere).

    A kind that every plugin watching it asks to watch in one namespace (``namespaced_watches``)
    is watched there only, so that checking it and watching it need no cluster-wide access.
    """
    plugins = list(plugins)
    kinds: list[Resource] = [WORKLOADS, CLUSTER_QUEUES, ADMISSION_CHECKS]
    for plugin in plugins:
        if plugin.parameters_kind is not None:
            kinds.append(plugin.parameters_kind)
        kinds.extend(plugin.watches)
    return [(kind, _watch_namespace(kind, plugins)) for kind in dict.fromkeys(kinds)]


def _watch_namespace(kind: Resource, plugins: list[AnyPlugin]) -> str | None:
    wanted = {plugin.namespaced_watches.get(kind) for plugin in plugins
              if kind in plugin.watches or kind == plugin.parameters_kind}
    if kind.namespaced and len(wanted) == 1:
        return wanted.pop()
    return None


def _reserved_in(namespace: str | None) -> Callable[[Obj], bool]:
    def keep(wl: Obj) -> bool:
        return holds_reservation(wl) and (namespace is None or wl["metadata"]["namespace"] == namespace)
    return keep


def _aware(seconds: float) -> datetime:
    """The runner's time as plugins see it (``context.now``): an aware UTC datetime."""
    return datetime.fromtimestamp(seconds, UTC)


def _key(wl: Obj) -> tuple[str, str]:
    return wl["metadata"].get("namespace", ""), wl["metadata"].get("name", "")


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
