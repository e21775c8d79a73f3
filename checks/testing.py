"""A testing kit for check plugins: kadmit on a local cluster, the plugin under test beside it.

A plugin's test is a few lines::

    from kadmit.checks.testing import LocalKueue

    async def test_small_jobs_may_start_any_time() -> None:
        async with LocalKueue(BusinessHoursCheck(), clock=FRIDAY_20.timestamp) as kueue:
            await kueue.cluster_queue("cq", cpu="16", checks=["business-hours"])
            wl = await kueue.submit_job("small", cpu="1", pods=2)
            assert (await kueue.check_state(wl, "business-hours"))["state"] == "Ready"
            await kueue.admitted(wl)

:class:`LocalKueue` starts ``kadmit local`` (API server, simulated nodes, kadmit with its
webhooks) as a subprocess whose Configuration enables none of the installed plugins, and runs
the plugins it is handed in this process, in a :class:`~kadmit.checks.runner.CheckRunner` on
that cluster. So kadmit's own scheduler reserves quota and admits once every check is Ready,
while the verdicts come from the plugin object the test built (installed or not) at the time
``clock`` says. Jobs go through kadmit's webhook and Job controller as a user's would.

kadmit runs as a subprocess, not in this process, because the SDK must not import kadmit's
controller or its local cluster (DESIGN.md's import arrows); it costs about three seconds to
start, so a test module may share one kit (a module-scoped fixture; assign :attr:`clock` to move
time).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from kadmit.checks.plugin import AnyPlugin
from kadmit.checks.runner import CheckRunner, required_watches
from kadmit.kube import Client, Informer, Informers, Obj, Resource
from kadmit.kube.lifecycle import Lifecycle, terminate
from kadmit.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    CUSTOM_RESOURCE_DEFINITIONS,
    JOBS,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from kadmit.workload import ADMITTED, PENDING, find_state, is_true

__all__ = ["LocalKueue", "LocalKueueError"]

READY_LINE = "kadmit local: ready;"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RUNTIME_ANNOTATION = "localcluster.kadmit.dev/runtime"  # how long the simulated kubelet runs a pod
FLAVOR = "default"
STDERR_TAIL = 3000  # characters of kadmit's stderr an error carries
T = TypeVar("T")


class LocalKueueError(RuntimeError):
    """``kadmit local`` could not start, died, or cannot serve what the plugins need.

    The message ends with the tail of its stderr, which says why.
    """


class LocalKueue(Lifecycle):
    """A local cluster with kadmit, and ``plugins`` deciding their AdmissionChecks on it.

    ``async with LocalKueue(plugin, ...) as kueue`` starts everything and stops it on exit.

    * ``clock`` — POSIX seconds, the time the plugins see as ``context.now`` (also :attr:`clock`,
      which may be reassigned); kadmit itself runs on the real time.
    * ``crds`` — CustomResourceDefinitions to install before the plugins start: the kinds a
      plugin's ``parameters_kind`` or ``watches`` name that kadmit does not install.
    * ``configuration`` — more of kadmit's Configuration (``waitForPodsReady``, ...); its
      ``admissionChecks`` block is always ``{enabled: []}``, so only the plugins given here run.
    * ``within`` — how long each waiting helper waits unless told otherwise, in seconds.
    * ``startup_timeout`` — how long ``kadmit local`` may take to print its ready line.
    """

    namespace = "default"  # where the LocalQueues and Jobs of the helpers go

    def __init__(
        self,
        *plugins: AnyPlugin,
        clock: Callable[[], float] = time.time,
        crds: Sequence[Mapping[str, Any]] = (),
        configuration: Mapping[str, Any] | None = None,
        within: float = 10.0,
        startup_timeout: float = 60.0,
    ) -> None:
        if not plugins:
            raise ValueError("LocalKueue needs the plugin under test")
        self.plugins = list(plugins)
        self.clock = clock
        self.within = within
        self._crds = [dict(crd) for crd in crds]
        self._configuration = dict(configuration or {})
        self._startup_timeout = startup_timeout
        self._directory: Path | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None
        self._client: Client | None = None
        self._informers: Informers | None = None
        self._runner: CheckRunner | None = None
        self._watched: list[Informer] = []
        self._waiters: set[asyncio.Event] = set()
        self._queues: list[str] = []
        self._verdicts: dict[tuple[str, str, str], Obj] = {}  # (namespace, workload, check) -> last verdict

    # -- what a test may use beyond the helpers

    @property
    def client(self) -> Client:
        """A :class:`kadmit.kube.Client` on the cluster, as its admin, for anything the helpers lack."""
        if self._client is None:
            raise RuntimeError("LocalKueue is not started: use `async with LocalKueue(...) as kueue`")
        return self._client

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig of the cluster (for kubectl, or a second client); gone after exit."""
        if self._directory is None:
            raise RuntimeError("LocalKueue is not started: use `async with LocalKueue(...) as kueue`")
        return self._directory / "kubeconfig"

    # -- start and stop

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        failure = await self.stop()
        if failure is not None and exc is None:
            raise LocalKueueError(failure)

    async def start(self) -> None:
        """Start kadmit local and the plugins (``async with`` does, and stops them again)."""
        self._queues.clear()
        self._verdicts.clear()
        self._directory = Path(tempfile.mkdtemp(prefix="kadmit-testing-"))
        config = self._directory / "config.yaml"
        document = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                    **self._configuration, "admissionChecks": {"enabled": []}}
        config.write_text(json.dumps(document))  # JSON is YAML
        with (self._directory / "stderr").open("wb") as err:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kadmit", "local", "--kubeconfig", str(self.kubeconfig),
                "--no-samples", "--config", str(config),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=err)
        await self._until_ready()
        self._client = await Client.connect(self.kubeconfig)
        self._informers = Informers(self._client)
        for crd in self._crds:
            await self._client.create(CUSTOM_RESOURCE_DEFINITIONS, {
                "apiVersion": CUSTOM_RESOURCE_DEFINITIONS.api_version,
                "kind": CUSTOM_RESOURCE_DEFINITIONS.kind, **crd})
        await self._until_served()
        for kind in (WORKLOADS, JOBS):
            informer = await self._informers.watch(kind)
            informer.add_handler(self._wake)
            self._watched.append(informer)
        self._runner = CheckRunner(self._client, self.plugins, watches=self._informers.watch,
                                   clock=lambda: self.clock(), on_evaluated=self._record)
        await self._runner.start()
        await asyncio.gather(*(informer.wait_synced() for informer in self._watched))

    async def _until_ready(self) -> None:
        """Until kadmit local prints its ready line (it writes it once its webhooks are trusted);
        then its stdout is drained in the background, so that it never blocks on a full pipe."""
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        try:
            async with asyncio.timeout(self._startup_timeout):
                while READY_LINE not in (line := (await stdout.readline()).decode(errors="replace")):
                    if not line:  # the end of its stdout: it exited
                        code = await self._process.wait()
                        raise LocalKueueError(f"kadmit local exited with code {code} before it was ready; "
                                              f"{self._stderr_tail()}")
        except TimeoutError:
            raise LocalKueueError(f"kadmit local printed no ready line within {self._startup_timeout:g}s; "
                                  f"{self._stderr_tail()}") from None
        self._drain = asyncio.create_task(_drain(stdout))

    async def _until_served(self) -> None:
        """Until the cluster serves every kind the plugins read (a just-created CRD takes a moment)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.within if self._crds else 0.0)  # kadmit's own kinds: served at once
        for kind, _ in required_watches(self.plugins):
            while not await self.client.served(kind):
                if loop.time() > deadline:
                    raise LocalKueueError(f"the cluster does not serve {kind}, which a plugin reads: "
                                          f"pass its CustomResourceDefinition as LocalKueue(crds=[...])")
                await asyncio.sleep(0.1)

    async def stop(self) -> str | None:
        """Stop the runner, the client and kadmit local; remove the files. Returns what went wrong."""
        failure: str | None = None
        try:
            if self._runner is not None:
                await self._runner.stop()
            if self._informers is not None:
                await self._informers.stop()
            if self._client is not None:
                await self._client.close()
        finally:
            self._runner, self._informers, self._client, self._watched = None, None, None, []
            process, self._process = self._process, None
            if process is not None:
                failure = await self._terminate(process)
            drain, self._drain = self._drain, None
            if drain is not None:  # ends with the process's stdout (cancelled if a descendant holds it)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(drain, 5)
            if self._directory is not None:
                shutil.rmtree(self._directory, ignore_errors=True)
                self._directory = None
        return failure

    async def _terminate(self, process: asyncio.subprocess.Process) -> str | None:
        if process.returncode is not None:
            return (f"kadmit local exited with code {process.returncode} during the test; "
                    f"{self._stderr_tail()}")
        if await terminate(process, 15):
            return f"kadmit local did not stop within 15s of SIGTERM and was killed; {self._stderr_tail()}"
        if process.returncode != 0:
            return f"kadmit local exited with code {process.returncode} on SIGTERM; {self._stderr_tail()}"
        return None

    def _stderr_tail(self) -> str:
        text = ""
        if self._directory is not None:
            with contextlib.suppress(OSError):
                text = (self._directory / "stderr").read_text(errors="replace")
        text = text.strip()
        return f"its stderr ends with:\n{text[-STDERR_TAIL:]}" if text else "its stderr is empty"

    # -- setting up queues and checks

    async def admission_check(self, name: str, *, controller_name: str | None = None,
                              parameters: Mapping[str, Any] | None = None) -> Obj:
        """Create the AdmissionCheck ``name`` for a plugin (the only one, unless ``controller_name``).

        ``parameters`` is the body of the object its ``spec.parameters`` references (e.g.
        ``{"spec": {...}}``), created as the plugin's ``parameters_kind``, named ``name`` unless
        its ``metadata`` says otherwise.
        """
        controller = controller_name or self._only_plugin().controller_name
        spec: Obj = {"controllerName": controller}
        if parameters is not None:
            plugin = next((p for p in self.plugins if p.controller_name == controller), None)
            kind = plugin.parameters_kind if plugin is not None else None
            if kind is None:
                raise ValueError(f"no plugin under test with controllerName {controller!r} "
                                 "declares a parameters_kind")
            body: Obj = {"apiVersion": kind.api_version, "kind": kind.kind, **parameters}
            body["metadata"] = {"name": name, **(parameters.get("metadata") or {})}
            created = await self.client.create(kind, body)
            spec["parameters"] = {"apiGroup": kind.group, "kind": kind.kind,
                                  "name": created["metadata"]["name"]}
        return await self.client.create(ADMISSION_CHECKS, _object(ADMISSION_CHECKS, name, spec=spec))

    async def cluster_queue(self, name: str, *, cpu: str = "16", checks: Iterable[str] = ()) -> Obj:
        """A ClusterQueue with ``cpu`` of quota and ``checks``, and a LocalQueue of the same name.

        The ResourceFlavor ``default`` and the AdmissionChecks are created if they do not exist
        yet (for the only plugin: see :meth:`admission_check` for another or for parameters).
        """
        names = list(checks)
        if await self.client.get_or_none(RESOURCE_FLAVORS, None, FLAVOR) is None:
            await self.client.create(RESOURCE_FLAVORS, _object(RESOURCE_FLAVORS, FLAVOR, spec={}))
        for check in names:
            if await self.client.get_or_none(ADMISSION_CHECKS, None, check) is None:
                await self.admission_check(check)
        spec: Obj = {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}],
            "admissionChecksStrategy": {"admissionChecks": [{"name": check} for check in names]},
        }
        queue = await self.client.create(CLUSTER_QUEUES, _object(CLUSTER_QUEUES, name, spec=spec))
        await self.client.create(LOCAL_QUEUES, _object(LOCAL_QUEUES, name, self.namespace,
                                                       spec={"clusterQueue": name}))
        self._queues.append(name)
        return queue

    # -- submitting work

    async def submit_job(self, name: str, *, pods: int = 1, cpu: str = "1", queue: str | None = None,
                         runtime: str | None = None, within: float | None = None) -> Obj:
        """Create a batch/v1 Job as a user would (kadmit's webhook suspends it); return its Workload.

        ``pods`` run in parallel, each requesting ``cpu``. ``queue`` is the LocalQueue (default:
        the only one :meth:`cluster_queue` made). ``runtime`` is how long each pod runs once
        started (a Go duration such as ``30s``; default 1s).
        """
        queue = queue or self._only_queue()
        template: Obj = {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}
        if runtime is not None:
            template["metadata"] = {"annotations": {RUNTIME_ANNOTATION: runtime}}
        job = _object(JOBS, name, self.namespace,
                      spec={"parallelism": pods, "completions": pods, "template": template})
        job["metadata"]["labels"] = {QUEUE_LABEL: queue}
        uid = (await self.client.create(JOBS, job))["metadata"]["uid"]

        def workload() -> Obj | None:
            return next((wl for wl in self._workloads.list(self.namespace) if any(
                ref.get("uid") == uid for ref in wl["metadata"].get("ownerReferences") or [])), None)

        return await self._until(workload, f"the Workload of Job {self.namespace}/{name}",
                                 lambda: "kadmit made none (is the LocalQueue right?)", within)

    # -- waiting

    async def check_state(self, workload: Obj, check: str, *, state: str | None = None,
                          within: float | None = None) -> Obj:
        """The workload's ``status.admissionChecks`` entry for ``check`` once the plugin decided it.

        Without ``state``: once the plugins under test evaluated the check and the entry in the
        API shows their verdict (so a decided Pending is told from one nobody looked at). With
        ``state``: once the entry has that state, whoever wrote it.
        """
        namespace, name = _key(workload)

        def decided() -> Obj | None:
            entry = find_state(self._workload(namespace, name) or {}, check)
            if entry is None:
                return None
            if state is not None:
                return entry if entry.get("state") == state else None
            verdict = self._verdicts.get((namespace, name, check))
            if verdict is None:
                return None
            same = (entry.get("state"), entry.get("message", "")) == (verdict["state"], verdict["message"])
            return entry if same else None

        def last_seen() -> str:
            verdict = self._verdicts.get((namespace, name, check))
            told = ("no plugin under test evaluated it (does the ClusterQueue list the check, and does "
                    "the workload hold quota?)" if verdict is None else
                    f"the plugin's last verdict: {verdict['state']} {verdict['message']!r}")
            return f"{told}; {self._describe(namespace, name)}"

        wanted = f"state {state}" if state is not None else "a verdict from the plugin under test"
        return await self._until(decided, f"check {check!r} of Workload {namespace}/{name} with {wanted}",
                                 last_seen, within)

    async def admitted(self, workload: Obj, *, within: float | None = None) -> Obj:
        """The Workload once kadmit admitted it (quota reserved and every check Ready)."""
        return await self.wait_for(workload, lambda wl: is_true(wl, ADMITTED), what="admitted",
                                   within=within)

    async def started(self, workload: Obj, *, within: float | None = None) -> Obj:
        """The workload's Job once kadmit unsuspended it (with the checks' podSetUpdates applied)."""
        namespace, name = _key(workload)
        owner = next((ref for ref in workload["metadata"].get("ownerReferences") or []
                      if ref.get("kind") == "Job"), None)
        if owner is None:
            raise ValueError(f"Workload {namespace}/{name} belongs to no Job")

        def unsuspended() -> Obj | None:
            job = self._jobs.get(namespace, owner["name"])
            return job if job is not None and job["spec"].get("suspend") is False else None

        return await self._until(unsuspended, f"Job {namespace}/{owner['name']}: started",
                                 lambda: self._describe(namespace, name), within)

    async def wait_for(self, workload: Obj, predicate: Callable[[Obj], bool], *, what: str,
                       within: float | None = None) -> Obj:
        """The Workload once ``predicate`` holds for it; ``what`` names the wait in the error."""
        namespace, name = _key(workload)

        def matching() -> Obj | None:
            wl = self._workload(namespace, name)
            return wl if wl is not None and predicate(wl) else None

        return await self._until(matching, f"Workload {namespace}/{name}: {what}",
                                 lambda: self._describe(namespace, name), within)

    async def _until(self, find: Callable[[], T | None], what: str, last_seen: Callable[[], str],
                     within: float | None) -> T:
        """``find()`` once it is not None, re-tried on every watch event and verdict; else an
        AssertionError saying what was awaited and what was last seen."""
        limit = self.within if within is None else within
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        changed = asyncio.Event()
        self._waiters.add(changed)
        try:
            while True:
                found = find()
                if found is not None:
                    return found
                if self._process is not None and self._process.returncode is not None:
                    raise LocalKueueError(f"while waiting for {what}: kadmit local exited with code "
                                          f"{self._process.returncode}; {self._stderr_tail()}")
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise AssertionError(f"waited {limit:g}s for {what}; {last_seen()}")
                changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), min(remaining, 0.5))
        finally:
            self._waiters.discard(changed)

    def _wake(self, *_: Any) -> None:
        for waiter in self._waiters:
            waiter.set()

    def _record(self, workload: Obj, entry: Obj) -> None:
        """The runner's ``on_evaluated``: the plugin's latest verdict per workload and check."""
        namespace, name = _key(workload)
        self._verdicts[(namespace, name, str(entry["name"]))] = {
            "state": entry.get("state", PENDING), "message": entry.get("message", "")}
        self._wake()

    # -- reading

    @property
    def _workloads(self) -> Informer:
        return self._watched[0]

    @property
    def _jobs(self) -> Informer:
        return self._watched[1]

    def _workload(self, namespace: str, name: str) -> Obj | None:
        if not self._watched:
            raise RuntimeError("LocalKueue is not started: use `async with LocalKueue(...) as kueue`")
        return self._workloads.get(namespace, name)

    def _describe(self, namespace: str, name: str) -> str:
        """The workload's conditions and checks as last seen, for an error message."""
        wl = self._workload(namespace, name)
        if wl is None:
            return "the Workload does not exist"
        status = wl.get("status") or {}
        conditions = ", ".join(f"{c.get('type')}={c.get('status')} ({c.get('message', '')})"
                               for c in status.get("conditions") or []) or "none"
        checks = ", ".join(f"{e.get('name')}={e.get('state')} ({e.get('message', '')})"
                           for e in status.get("admissionChecks") or []) or "none"
        return f"last seen: conditions {conditions}; admission checks {checks}"

    def _only_plugin(self) -> AnyPlugin:
        if len(self.plugins) != 1:
            raise ValueError("several plugins under test: create the AdmissionCheck with "
                             "admission_check(name, controller_name=...) first")
        return self.plugins[0]

    def _only_queue(self) -> str:
        if len(self._queues) != 1:
            raise ValueError(f"pass queue=: the LocalQueues are {self._queues or 'none yet'}")
        return self._queues[0]


def _object(kind: Resource, name: str, namespace: str | None = None, **fields: Any) -> Obj:
    metadata: Obj = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata, **fields}


def _key(workload: Obj) -> tuple[str, str]:
    return str(workload["metadata"]["namespace"]), str(workload["metadata"]["name"])


async def _drain(stream: asyncio.StreamReader) -> None:
    """Read ``stream`` to its end, discarding it (kadmit local's lines after the ready one)."""
    while await stream.read(65536):
        pass
