"""The fault suite's machinery, shared by tests/chaos/ and bench/chaos.py.

- :class:`Invariants` listens to the local cluster's store and checks every committed change
  (not a sample, not a poll) of Workloads, ClusterQueues and Jobs: the quota reserved per flavor
  and resource never exceeds a ClusterQueue's quota (nominal plus its borrowing limit) nor its
  cohort's (the sum of its members' nominal quotas); a ClusterQueue's own reported reservation
  never exceeds its quota; a Job is started (``spec.suspend`` true → false, or created unsuspended)
  only while a Workload it owns is admitted and not evicted. Its ``finish`` checks the end: every
  Job complete, no Workload unfinished, and usage back to 0 both as counted from the Workloads
  and as each ClusterQueue reports it (a Finished Workload still counted would show there).
  The oracle is independent of kadmit: quantities are read with the local cluster's parser.
- :class:`KadmitProcess` runs ``kadmit run`` as the Deployment does, kills it with SIGKILL and
  starts it again.
- :class:`Acting` records which replica made each committed write (told apart by token) and
  which replica held the Lease when each was committed: a write by a replica that did not hold
  the Lease at that moment is a moment with two leaders acting.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import copy
import json
import os
import random
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from aiohttp import web

from kadmit.kube.resources import NAMESPACES
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.quantity import QuantityError, parse_quantity
from kadmit.localcluster.store import Event

Obj = dict[str, Any]
FlavorResource = tuple[str, str]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
KUEUE = "kueue.x-k8s.io"

CONFIG = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kadmit-system
webhook: {{port: 0, host: 127.0.0.1}}
metrics: {{bindAddress: "127.0.0.1:0"}}
health: {{healthProbeBindAddress: "127.0.0.1:0"}}
leaderElection: {{leaderElect: {elect}, leaseDuration: 2s, renewDeadline: 1500ms, retryPeriod: 300ms}}
"""

# Two ClusterQueues of 3 CPUs in one cohort, each may borrow at most 2 of the other's: a Job of
# the one queue can use the other's idle quota, so cohort accounting is under test too.
SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu}
spec:
  nodeLabels: {kadmit.dev/pool: cpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: chaos
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu
      resources:
      - {name: cpu, nominalQuota: 3, borrowingLimit: 2}
      - {name: memory, nominalQuota: 10Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohortName: chaos
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu
      resources:
      - {name: cpu, nominalQuota: 3, borrowingLimit: 2}
      - {name: memory, nominalQuota: 10Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-a, namespace: default}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-b, namespace: default}
spec: {clusterQueue: team-b}
"""
QUEUES = ("team-a", "team-b")


def condition(obj: Obj | None, kind: str) -> bool:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return bool(c.get("status") == "True")
    return False


def _amount(value: Any) -> Fraction:
    try:
        return parse_quantity(value)
    except QuantityError:
        return Fraction(0)


def reserved(wl: Obj) -> tuple[str, dict[FlavorResource, Fraction]] | None:
    """The ClusterQueue a Workload holds quota in and how much, as Kueue counts it: a Workload
    with QuotaReserved and not Finished, less the pods it reports reclaimable."""
    if not condition(wl, "QuotaReserved") or condition(wl, "Finished"):
        return None
    status = wl.get("status") or {}
    admission = status.get("admission") or {}
    reclaimable = {p.get("name"): int(p.get("count") or 0) for p in status.get("reclaimablePods") or []}
    usage: dict[FlavorResource, Fraction] = {}
    for psa in admission.get("podSetAssignments") or []:
        count = int(psa.get("count") or 0)
        active = max(count - reclaimable.get(psa.get("name"), 0), 0)
        for resource, quantity in (psa.get("resourceUsage") or {}).items():
            flavor = (psa.get("flavors") or {}).get(resource)
            if flavor is None:
                continue
            total = _amount(quantity)
            share = total if count == 0 else total / count * active
            usage[(flavor, resource)] = usage.get((flavor, resource), Fraction(0)) + share
    return str(admission.get("clusterQueue") or ""), usage


@dataclass
class _Queue:
    cohort: str = ""
    nominal: dict[FlavorResource, Fraction] = field(default_factory=dict)
    borrowing: dict[FlavorResource, Fraction] = field(default_factory=dict)


def _queue(cq: Obj) -> _Queue:
    spec = cq.get("spec") or {}
    queue = _Queue(cohort=str(spec.get("cohortName") or spec.get("cohort") or ""))
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                key = (str(flavor.get("name")), str(resource.get("name")))
                queue.nominal[key] = _amount(resource.get("nominalQuota", 0))
                if resource.get("borrowingLimit") is not None:
                    queue.borrowing[key] = _amount(resource["borrowingLimit"])
    return queue


class Invariants:
    """Every committed change of Workloads, ClusterQueues and Jobs, checked as it is committed."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.violations: list[str] = []
        self.events = 0
        self.checks = 0
        self.starts = 0  # Jobs started (unsuspended), each checked
        self.peak: dict[str, Fraction] = {}  # the most CPU each ClusterQueue ever held
        self._queues: dict[str, _Queue] = {}
        self._held: dict[tuple[str, str], tuple[str, dict[FlavorResource, Fraction]]] = {}
        self._usage: dict[str, dict[FlavorResource, Fraction]] = {}
        self._owned: dict[str, dict[tuple[str, str], Obj]] = {}  # Job uid -> its Workloads
        cluster.store.add_listener(self._on_event)

    def _violate(self, rv: int, message: str) -> None:
        if len(self.violations) < 1000:
            self.violations.append(f"rv {rv}: {message}")

    def _on_event(self, event: Event) -> None:
        group, plural = event.key
        if (group, plural) == (KUEUE, "workloads"):
            self._workload(event)
        elif (group, plural) == (KUEUE, "clusterqueues"):
            self._cluster_queue(event)
        elif (group, plural) == ("batch", "jobs"):
            self._job(event)
        else:
            return
        self.events += 1

    def _workload(self, event: Event) -> None:
        meta = event.object.get("metadata") or {}
        key = (str(meta.get("namespace")), str(meta.get("name")))
        for ref in meta.get("ownerReferences") or []:
            owned = self._owned.setdefault(str(ref.get("uid")), {})
            if event.type == "DELETED":
                owned.pop(key, None)
            else:
                owned[key] = event.object
        before = self._held.pop(key, None)
        if before is not None:
            usage = self._usage.setdefault(before[0], {})
            for fr, amount in before[1].items():
                usage[fr] = usage.get(fr, Fraction(0)) - amount
        now = None if event.type == "DELETED" else reserved(event.object)
        if now is None:
            return
        self._held[key] = now
        usage = self._usage.setdefault(now[0], {})
        for fr, amount in now[1].items():
            usage[fr] = usage.get(fr, Fraction(0)) + amount
        self._check_quota(event.rv, now[0])

    def _check_quota(self, rv: int, name: str) -> None:
        self.checks += 1
        queue = self._queues.get(name)
        if queue is None:
            self._violate(rv, f"quota reserved in {name!r}, which is no ClusterQueue")
            return
        usage = self._usage.get(name, {})
        cpu = sum((a for (_, r), a in usage.items() if r == "cpu"), Fraction(0))
        self.peak[name] = max(self.peak.get(name, Fraction(0)), cpu)
        for fr, amount in usage.items():
            limit = queue.nominal.get(fr, Fraction(0))
            if queue.cohort:
                limit += queue.borrowing.get(fr, Fraction(10**18))
            if amount > limit:
                self._violate(rv, f"{name} holds {float(amount):g} {fr[1]} of flavor {fr[0]}, "
                                  f"limit {float(limit):g}")
        if queue.cohort:
            members = [n for n, q in self._queues.items() if q.cohort == queue.cohort]
            for fr in usage:
                total = sum((self._usage.get(m, {}).get(fr, Fraction(0)) for m in members), Fraction(0))
                capacity = sum((self._queues[m].nominal.get(fr, Fraction(0)) for m in members), Fraction(0))
                if total > capacity:
                    self._violate(rv, f"cohort {queue.cohort} holds {float(total):g} {fr[1]} of {fr[0]}, "
                                      f"capacity {float(capacity):g}")

    def _cluster_queue(self, event: Event) -> None:
        name = str((event.object.get("metadata") or {}).get("name"))
        if event.type == "DELETED":
            self._queues.pop(name, None)
            return
        queue = self._queues[name] = _queue(event.object)
        self.checks += 1
        for flavor in (event.object.get("status") or {}).get("flavorsReservation") or []:
            for resource in flavor.get("resources") or []:
                fr = (str(flavor.get("name")), str(resource.get("name")))
                total = _amount(resource.get("total", 0))
                limit = queue.nominal.get(fr, Fraction(0)) + (queue.borrowing.get(fr, Fraction(10**18))
                                                              if queue.cohort else Fraction(0))
                if total > limit:
                    self._violate(event.rv, f"{name} reports {float(total):g} {fr[1]} of {fr[0]} reserved, "
                                            f"limit {float(limit):g}")

    def _job(self, event: Event) -> None:
        if event.type == "DELETED":
            return
        started = not (event.object.get("spec") or {}).get("suspend") and (
            event.old is None or bool((event.old.get("spec") or {}).get("suspend")))
        if not started:
            return
        self.starts += 1
        self.checks += 1
        meta = event.object.get("metadata") or {}
        owned = self._owned.get(str(meta.get("uid")), {}).values()
        if not any(condition(wl, "Admitted") and not condition(wl, "Evicted") for wl in owned):
            states = [sorted(c["type"] for c in (wl.get("status") or {}).get("conditions") or []
                             if c.get("status") == "True") for wl in owned]
            self._violate(event.rv, f"Job {meta.get('namespace')}/{meta.get('name')} started while its "
                                    f"Workloads are {states or 'missing'}")

    def finish(self) -> list[str]:
        """The end: every Job complete, every Workload finished, no quota held, as counted here and
        as every ClusterQueue reports it. The problems found (with those found along the way)."""
        problems = list(self.violations)
        store = self.cluster.store
        for job in store.list("batch", "jobs"):
            if not condition(job, "Complete"):
                owned = self._owned.get(str(job["metadata"].get("uid")), {}).values()
                states = [sorted(c["type"] for c in (wl.get("status") or {}).get("conditions") or []
                                 if c.get("status") == "True") for wl in owned]
                active = (job.get("status") or {}).get("active", 0)
                problems.append(f"Job {job['metadata']['name']} did not complete (suspend "
                                f"{(job.get('spec') or {}).get('suspend')}, {active} active pods, "
                                f"Workloads {states})")
        for wl in store.list(KUEUE, "workloads"):
            if not condition(wl, "Finished"):
                problems.append(f"Workload {wl['metadata']['name']} is not finished")
        for name, usage in self._usage.items():
            if any(usage.values()):
                problems.append(f"{name} still holds {usage}")
        for cq in store.list(KUEUE, "clusterqueues"):
            status = cq.get("status") or {}
            for flavor in status.get("flavorsReservation") or []:
                for resource in flavor.get("resources") or []:
                    if _amount(resource.get("total", 0)):
                        problems.append(f"{cq['metadata']['name']} reports {resource} still reserved")
            if status.get("reservingWorkloads") or status.get("admittedWorkloads"):
                problems.append(f"{cq['metadata']['name']} reports workloads still holding quota")
        return problems

    async def settled(self, within: float) -> list[str]:
        """:meth:`finish` once it finds nothing, or what it still finds after ``within`` seconds."""
        deadline = asyncio.get_running_loop().time() + within
        while True:
            problems = self.finish()
            if not problems or asyncio.get_running_loop().time() > deadline:
                return problems
            await asyncio.sleep(0.2)


class KadmitProcess:
    """``kadmit run --kubeconfig K --config C`` as a child process, killed and started again."""

    def __init__(self, kubeconfig: str, workdir: Path, *, leader_elect: bool = True) -> None:
        self.kubeconfig = kubeconfig
        self.config = workdir / "kadmit-config.yaml"
        self.config.write_text(CONFIG.format(elect="true" if leader_elect else "false"))
        self.log = workdir / "kadmit.log"
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.kills = 0

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kadmit", "run", "--kubeconfig", self.kubeconfig,
                "--config", str(self.config), stdout=log, stderr=log,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.starts += 1

    async def kill(self) -> None:
        """SIGKILL: no clean stop, the Lease is not handed back, writes in flight are cut."""
        process = self.process
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGKILL)
            await process.wait()
            self.kills += 1

    def exited(self) -> int | None:
        """The exit code if it ended on its own (it must not: a fault is no reason to exit)."""
        process = self.process
        if process is None or process.returncode is None or process.returncode == -signal.SIGKILL:
            return None
        return process.returncode

    async def stop(self) -> None:
        process = self.process
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    await process.wait()
            except TimeoutError:
                await self.kill()

    def tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""


class Acting:
    """Who wrote what, and who held the Lease then: an aiohttp middleware (put it first, outside
    the fault injector) and a store listener. Replicas are told apart by their bearer tokens;
    ``hung`` holds replicas whose Lease requests hang (until their own deadline gives up)."""

    def __init__(self, lease: tuple[str, str]) -> None:
        self.cluster: LocalCluster | None = None
        self.lease = lease
        self.replicas: dict[str, str] = {}  # "Bearer <token>" -> replica
        self.hung: set[str] = set()
        self.writes: list[tuple[int, str, str]] = []  # (resourceVersion, replica, what)
        self._holders: list[tuple[int, str]] = []  # (resourceVersion, holder) of every Lease change
        self.hung_requests = 0

    def attach(self, cluster: LocalCluster) -> None:
        """Follow ``cluster``'s Lease (call before anything is written)."""
        self.cluster = cluster
        cluster.store.add_listener(self._on_event)

    def add(self, name: str, token: str) -> None:
        self.replicas[f"Bearer {token}"] = name

    def _on_event(self, event: Event) -> None:
        meta = event.object.get("metadata") or {}
        if event.key == ("coordination.k8s.io", "leases") and (meta.get("namespace"), meta.get("name")) \
                == self.lease:
            holder = "" if event.type == "DELETED" else str((event.object.get("spec") or {})
                                                                .get("holderIdentity") or "")
            self._holders.append((event.rv, holder))

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        replica = self.replicas.get(request.headers.get("Authorization", ""))
        if replica in self.hung and "/leases" in request.path:
            self.hung_requests += 1
            await asyncio.Event().wait()  # until the client gives up and the server cancels it
        response = await handler(request)
        writes = ("POST", "PUT", "PATCH", "DELETE")
        if replica is None or self.cluster is None or request.method not in writes \
                or not 200 <= response.status <= 299 or "/leases" in request.path:
            return response
        rv = self.cluster.store.resource_version
        body = getattr(response, "body", None)
        if isinstance(body, bytes | bytearray):
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                rv = int(json.loads(body)["metadata"]["resourceVersion"])
        self.writes.append((rv, replica, f"{request.method} {request.path}"))
        return response

    def holder_at(self, rv: int) -> str:
        index = bisect.bisect_left(self._holders, (rv, "")) - 1
        return self._holders[index][1] if index >= 0 else ""

    def two_leaders(self) -> list[str]:
        """Every write committed by a replica that did not hold the Lease at that moment."""
        return [f"rv {rv}: {replica} wrote {what} while the Lease was held by {self.holder_at(rv)!r}"
                for rv, replica, what in self.writes if self.holder_at(rv) != replica]


# ---- one chaos run: a cluster, faults, kadmit killed and restarted while Jobs run ----------------

# The faults of a chaos run, as a plan file would give them (kadmit local --faults): 5 % of
# requests answered 500, 503 or 429, 2 % hung (never handled, cut after 3 s), 10 % of watches
# answered 410, every watch cut within 20 s. Injected from startAfterSeconds on, to everyone:
# kadmit, the simulated kubelets and Job controller, the run's own creates.
DEFAULT_PLAN: Obj = {
    "errors": {"fraction": 0.05, "statuses": [500, 503, 429], "retryAfterSeconds": 1},
    "hang": {"fraction": 0.02, "seconds": 3},
    "goneWatches": {"fraction": 0.1},
    "cutWatches": {"withinSeconds": 20},
}


@dataclass
class ChaosWorld:
    cluster: LocalCluster
    api: Any  # the kubernetes-asyncio ApiClient under ``kube``
    kube: Any  # kadmit.kube.Client (the run's own writes, and setting up)
    faults: Any  # kadmit.localcluster.faults.FaultInjector
    invariants: Invariants


@contextlib.asynccontextmanager
async def chaos_world(seed: int, *, acting: Acting | None = None) -> AsyncIterator[ChaosWorld]:
    """A local cluster with simulated nodes, a fault injector (off until set), Kueue's CRDs, the
    chaos queues and the invariant checker; ``acting`` in front of the faults when given."""
    import yaml

    from kadmit.controller.apply import Applier
    from kadmit.kube import Client
    from kadmit.localcluster.faults import FaultInjector
    from kadmit.localcluster.sim import default_addons
    from tests.e2e.conftest import crd_documents, node_config

    faults = FaultInjector(seed=seed)
    middlewares = [faults.middleware] if acting is None else [acting.middleware, faults.middleware]
    async with LocalCluster(token=True, addons=default_addons(node_config(), seed=seed),
                            middlewares=middlewares) as cluster, await cluster.api_client() as api:
        if acting is not None:
            acting.attach(cluster)
        kube = Client(api)
        invariants = Invariants(cluster)
        applier = Applier(kube)
        await applier.apply_all(copy.deepcopy(crd_documents()))
        await applier.apply_all([d for d in yaml.safe_load_all(SETUP) if d])
        await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": "kadmit-system"}})
        try:
            yield ChaosWorld(cluster, api, kube, faults, invariants)
        finally:
            faults.clear()


def chaos_job(name: str, rng: random.Random) -> Obj:
    """A small Job for one of the two queues: 1 or 2 pods of 500m to 2 CPUs, 0.2 to 1 s each."""
    from tests.e2e.helpers import job

    cpu = rng.choice(["500m", "1", "1500m", "2"])
    runtime = f"{rng.randint(200, 1000)}ms"
    return job(name, cpu=cpu, parallelism=rng.randint(1, 2), runtime=runtime, queue=rng.choice(QUEUES))


async def create_retrying(kube: Any, resource: Any, obj: Obj, within: float = 60.0) -> None:
    """Create through the faults: a retryable failure is tried again; AlreadyExists means an
    earlier try landed."""
    from kadmit.kube.errors import ApiError

    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            await kube.create(resource, obj)
            return
        except ApiError as exc:
            if exc.already_exists:
                return
            if not exc.retryable or asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(0.1)


@dataclass
class ChaosReport:
    jobs: int
    kills: int
    wall: float
    problems: list[str]
    exits: list[str]
    faults: dict[str, Any]
    events: int
    checks: int
    job_starts: int
    peak_cpu: dict[str, float]

    @property
    def completed(self) -> int:
        return self.jobs - sum(1 for p in self.problems if "did not complete" in p)


async def run_chaos(
    world: ChaosWorld, workdir: Path, *, jobs: int, kills: int, seed: int, plan: Obj | None = None,
    kill_every: tuple[float, float] = (1.0, 6.0), settle_within: float = 120.0,
    progress: Callable[[str], None] | None = None,
) -> ChaosReport:
    """``kadmit run`` (leader election on, a 2 s Lease) killed with SIGKILL ``kills`` times at
    random moments and started again at once, while ``jobs`` Jobs are created and run under the
    plan's faults; then the faults stop and the run settles. Invariants are checked all along."""
    from kadmit.kube.resources import JOBS
    from kadmit.localcluster.faults import parse_plan

    rng = random.Random(seed)
    world.faults.apply(parse_plan(DEFAULT_PLAN if plan is None else plan))
    kadmit = KadmitProcess(world.cluster.kubeconfig, workdir)
    exits: list[str] = []
    loop = asyncio.get_running_loop()
    started = loop.time()
    await kadmit.start()
    intervals = [rng.uniform(*kill_every) for _ in range(kills)]
    span = sum(intervals) or 1.0

    async def create_jobs() -> None:
        for i in range(jobs):
            await create_retrying(world.kube, JOBS, chaos_job(f"chaos-{i}", rng))
            await asyncio.sleep(span / max(jobs, 1) * rng.uniform(0.5, 1.5))

    creator = asyncio.create_task(create_jobs())
    try:
        for n, interval in enumerate(intervals):
            await asyncio.sleep(interval)
            code = kadmit.exited()
            if code is not None:
                exits.append(f"kadmit run exited {code} on its own:\n{kadmit.tail()}")
            await kadmit.kill()
            await kadmit.start()
            if progress is not None and (n + 1) % 10 == 0:
                progress(f"{n + 1} kills, {len(world.invariants.violations)} violations so far")
        await creator
        world.faults.clear()  # what is left must finish: every Job, every release
        problems = await world.invariants.settled(settle_within)
        code = kadmit.exited()
        if code is not None:
            exits.append(f"kadmit run exited {code} on its own:\n{kadmit.tail()}")
    finally:
        creator.cancel()
        await asyncio.gather(creator, return_exceptions=True)
        await kadmit.stop()
    invariants = world.invariants
    return ChaosReport(jobs=jobs, kills=kadmit.kills, wall=loop.time() - started, problems=problems,
                       exits=exits, faults=world.faults.counts.as_dict(), events=invariants.events,
                       checks=invariants.checks, job_starts=invariants.starts,
                       peak_cpu={q: float(v) for q, v in invariants.peak.items()})


# ---- leadership: two replicas, skewed clocks, hung renewals ------------------------------------

LEASE = ("kadmit-system", "chaos-leader")
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 2.0, 1.5, 0.3


@dataclass
class LeadershipReport:
    trials: int
    takeovers: int  # trials after which the other replica held the Lease
    writes: int  # writes the replicas made (the Lease's aside), each checked
    hung_requests: int
    two_leaders: list[str]  # writes by a replica that did not hold the Lease then
    problems: list[str]  # the invariants' (quota, Job starts, every Job complete)
    wall: float


class _Replica:
    """kadmit's Manager behind a LeaderElector, on a token of its own and a clock of its own."""

    def __init__(self, world: ChaosWorld, acting: Acting, name: str) -> None:
        self.world, self.acting, self.name = world, acting, name
        self.skew = 0.0
        self.task: asyncio.Task[None] | None = None

    def clock(self) -> float:
        return time.time() + self.skew

    async def start(self) -> None:
        from kadmit.controller.manager import Manager
        from kadmit.kube import Client, LeaderElector, LeaseTiming
        from tests.e2e.conftest import fast_config

        token = secrets.token_urlsafe(16)
        self.world.cluster.add_user(token, f"replica-{self.name}", ["system:masters"])
        self.acting.add(self.name, token)
        self.api = await self.world.cluster.api_client(token)
        self.manager = Manager(Client(self.api), fast_config(), clock=self.clock)
        await self.manager.start_caches()
        self.elector = LeaderElector(
            self.manager.kube, *LEASE, self.name,
            timing=LeaseTiming(LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD),
            on_started_leading=self.manager.start_loops, on_stopped_leading=self.manager.stop_loops,
            clock=self.clock)
        self.task = asyncio.create_task(self.elector.run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.manager.stop()
        await self.api.close()


async def run_leadership(world: ChaosWorld, acting: Acting, *, trials: int, seed: int,
                         progress: Callable[[str], None] | None = None) -> LeadershipReport:
    """Two replicas; in each trial both clocks jump to a new skew (up to 20 s either way) and the
    leader's Lease requests hang for 0.5 to 4 s (longer than its renew deadline about two times
    in three), while a Job arrives. Every write of theirs is checked against the Lease's holder
    at the moment it was committed."""
    from kadmit.kube.resources import JOBS, LEASES

    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    started = loop.time()
    replicas = [_Replica(world, acting, "a"), _Replica(world, acting, "b")]
    takeovers = 0
    try:
        for replica in replicas:
            await replica.start()
        for trial in range(trials):
            holder = ""
            while not holder:  # the Lease as the server has it
                lease = world.cluster.store.get("coordination.k8s.io", "leases", *LEASE) or {}
                holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
                await asyncio.sleep(0.05)
            for replica in replicas:
                replica.skew = rng.uniform(-20.0, 20.0)
            await create_retrying(world.kube, JOBS, chaos_job(f"lead-{trial}", rng))
            acting.hung.add(holder)
            await asyncio.sleep(rng.uniform(0.5, 4.0))
            acting.hung.discard(holder)
            await asyncio.sleep(rng.uniform(0.3, 1.0))
            lease = await world.kube.get(LEASES, *LEASE)
            takeovers += (lease.get("spec") or {}).get("holderIdentity") not in ("", holder)
            if progress is not None and (trial + 1) % 10 == 0:
                moments = len(acting.two_leaders())
                progress(f"{trial + 1} leadership trials, {moments} moments with two leaders")
        problems = await world.invariants.settled(60)
    finally:
        acting.hung.clear()
        for replica in replicas:
            await replica.stop()
    return LeadershipReport(trials=trials, takeovers=takeovers, writes=len(acting.writes),
                            hung_requests=acting.hung_requests, two_leaders=acting.two_leaders(),
                            problems=problems, wall=loop.time() - started)
