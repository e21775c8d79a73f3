"""Why is my job waiting: every waiting Workload says so, in its conditions and in Events, and the
queues' counts (status and metrics) agree and reach zero once everything finished (issue 13).

kadmit runs as ``kadmit local`` runs it: behind the cluster's webhooks, with its metrics endpoint.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from kadmit.controller.apply import Applier
from kadmit.kube import Client
from kadmit.kube.resources import CLUSTER_QUEUES, EVENTS, JOBS, LOCAL_QUEUES, NAMESPACES, WORKLOADS
from tests.e2e.conftest import WebhookEnv, eventually, fast_config, webhook_env
from tests.e2e.helpers import condition_of, job
from tests.e2e.test_metrics import scrape, value

Obj = dict[str, Any]

SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu}
spec:
  nodeLabels: {kadmit.dev/pool: cpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: two}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu
      resources:
      - {name: cpu, nominalQuota: 2}
      - {name: memory, nominalQuota: 10Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: two, namespace: default}
spec: {clusterQueue: two}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {matchLabels: {team: a}}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu
      resources:
      - {name: cpu, nominalQuota: 2}
      - {name: memory, nominalQuota: 10Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: held, namespace: default}
spec: {clusterQueue: two, stopPolicy: Hold}
"""

NO_ROOM = (
    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor cpu, 1 more needed"
)
MISMATCH = "workload namespace doesn't match ClusterQueue selector"


@pytest.fixture
async def kadmit_lq() -> AsyncIterator[WebhookEnv]:
    """kadmit with the LocalQueue metrics and the ClusterQueue resource gauges on."""
    config = dataclasses.replace(fast_config(), enable_cluster_queue_resources=True, local_queue_metrics=True)
    async for env in webhook_env(config=config):
        await Applier(env.kube).apply_all([d for d in yaml.safe_load_all(SETUP) if d])
        yield env


def in_namespace(obj: Obj, namespace: str) -> Obj:
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = namespace
    return obj


async def workloads_of(kube: Client, namespace: str, queue: str) -> list[Obj]:
    items = (await kube.list(WORKLOADS, namespace))["items"]
    return [w for w in items if w["spec"].get("queueName") == queue]


async def warnings(kube: Client, namespace: str) -> dict[str, list[tuple[str, str]]]:
    """Per Workload name: the (reason, message) of its Warning events."""
    found: dict[str, list[tuple[str, str]]] = {}
    for event in (await kube.list(EVENTS, namespace))["items"]:
        involved = event["involvedObject"]
        if involved.get("kind") == "Workload" and event["type"] == "Warning":
            found.setdefault(involved["name"], []).append((event["reason"], event["message"]))
    return found


def reserved(wl: Obj) -> bool:
    return (condition_of(wl, "QuotaReserved") or {}).get("status") == "True"


def finished(wl: Obj) -> bool:
    return (condition_of(wl, "Finished") or {}).get("status") == "True"


async def counts(env: WebhookEnv, queue: str = "two") -> dict[str, tuple[int, int, int]]:
    """(pending, reserving, admitted) of the LocalQueue ``queue`` and ClusterQueue ``two``, in
    their status and in the metrics."""
    lq = (await env.kube.get(LOCAL_QUEUES, "default", queue)).get("status") or {}
    cq = (await env.kube.get(CLUSTER_QUEUES, None, "two")).get("status") or {}
    assert env.app is not None
    found = await scrape(env.app)

    def metric(family: str, **labels: str) -> int:
        return int(value(found, family, **labels))

    lq_pending = sum(
        metric("kueue_local_queue_pending_workloads", name=queue, namespace="default", status=s)
        for s in ("active", "inadmissible")
    )
    cq_pending = sum(
        metric("kueue_pending_workloads", cluster_queue="two", status=s) for s in ("active", "inadmissible")
    )

    def of(status: Obj) -> tuple[int, int, int]:
        return (
            int(status.get("pendingWorkloads") or 0),
            int(status.get("reservingWorkloads") or 0),
            int(status.get("admittedWorkloads") or 0),
        )

    return {
        "lq status": of(lq),
        "cq status": of(cq),
        "lq metrics": (
            lq_pending,
            metric("kueue_local_queue_reserving_active_workloads", name=queue, namespace="default"),
            metric("kueue_local_queue_admitted_active_workloads", name=queue, namespace="default"),
        ),
        "cq metrics": (
            cq_pending,
            metric("kueue_reserving_active_workloads", cluster_queue="two"),
            metric("kueue_admitted_active_workloads", cluster_queue="two"),
        ),
    }


async def agreeing(
    env: WebhookEnv, expected: tuple[int, int, int] | None = None, queue: str = "two"
) -> tuple[int, int, int]:
    """The counts once status and metrics agree (and equal ``expected`` if given)."""

    async def check() -> tuple[int, int, int] | None:
        seen = await counts(env, queue)
        values = set(seen.values())
        if len(values) != 1:
            return None
        [agreed] = values
        return agreed if expected is None or agreed == expected else None

    result: tuple[int, int, int] = await eventually(check, within=10, what=f"queue counts {expected}")
    return result


async def test_ten_jobs_where_two_fit_each_waiting_one_says_why(kadmit_lq: WebhookEnv) -> None:
    kube = kadmit_lq.kube
    for i in range(10):
        await kube.create(JOBS, job(f"wait-{i}", cpu="1", parallelism=1, runtime="1500ms", queue="two"))

    async def all_told() -> list[Obj] | None:
        wls = await workloads_of(kube, "default", "two")
        waiting = [w for w in wls if not reserved(w) and not finished(w)]
        if len(wls) < 10 or len(waiting) < 6:
            return None
        for wl in waiting:
            quota = condition_of(wl, "QuotaReserved") or {}
            if (quota.get("status"), quota.get("reason"), quota.get("message")) != (
                "False",
                "WaitingForQuota",
                NO_ROOM,
            ):
                return None
        told = await warnings(kube, "default")
        if any(("WaitingForQuota", NO_ROOM) not in told.get(w["metadata"]["name"], []) for w in waiting):
            return None
        return waiting

    waiting = await eventually(all_told, within=5, what="every waiting Workload told why")
    # the counts agree while they wait, whatever the moment
    pending, reserving, admitted = await agreeing(kadmit_lq)
    assert pending + reserving <= 10 and reserving <= 2 and admitted <= reserving, (pending, reserving)
    assert len(waiting) >= 6

    async def all_finished() -> bool:
        wls = await workloads_of(kube, "default", "two")
        return len(wls) == 10 and all(finished(w) for w in wls)

    await eventually(all_finished, within=40, what="all ten finished")
    assert await agreeing(kadmit_lq, (0, 0, 0)) == (0, 0, 0)
    # Each was told once per message: a Workload waiting through several rounds is not told again
    # the same thing (a message may change, e.g. while a finishing Job's pods give quota back).
    for name, told in (await warnings(kube, "default")).items():
        assert len(told) == len(set(told)), (name, told)


async def test_a_namespace_the_cluster_queue_does_not_select_is_misconfigured_in_each(
    kadmit_lq: WebhookEnv,
) -> None:
    kube = kadmit_lq.kube
    for namespace in ("team-x", "team-y"):
        await kube.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        await kube.create(
            LOCAL_QUEUES,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "team-a", "namespace": namespace},
                "spec": {"clusterQueue": "team-a"},
            },
        )
        await kube.create(JOBS, in_namespace(job("stray", cpu="1", parallelism=1, queue="team-a"), namespace))

    async def misconfigured(namespace: str) -> Obj | None:
        wls = await workloads_of(kube, namespace, "team-a")
        if len(wls) != 1:
            return None
        quota = condition_of(wls[0], "QuotaReserved") or {}
        if (quota.get("status"), quota.get("reason"), quota.get("message")) != (
            "False",
            "Misconfigured",
            MISMATCH,
        ):
            return None
        told = await warnings(kube, namespace)
        return wls[0] if ("Misconfigured", MISMATCH) in told.get(wls[0]["metadata"]["name"], []) else None

    for namespace in ("team-x", "team-y"):
        await eventually(lambda n=namespace: misconfigured(n), within=5, what=f"Misconfigured in {namespace}")


async def test_a_held_local_queue_tells_a_new_workload_it_is_inactive(kadmit_lq: WebhookEnv) -> None:
    kube = kadmit_lq.kube
    await kube.create(JOBS, job("on-hold", cpu="1", parallelism=1, queue="held"))

    async def suspended() -> Obj | None:
        wls = await workloads_of(kube, "default", "held")
        if len(wls) != 1:
            return None
        quota = condition_of(wls[0], "QuotaReserved") or {}
        expected = ("False", "Suspended", "LocalQueue held is inactive")
        if (quota.get("status"), quota.get("reason"), quota.get("message")) != expected:
            return None
        told = await warnings(kube, "default")
        return (
            wls[0]
            if ("Suspended", "LocalQueue held is inactive") in told.get(wls[0]["metadata"]["name"], [])
            else None
        )

    await eventually(suspended, within=5, what="Suspended: LocalQueue held is inactive")
    running = await kube.get(JOBS, "default", "on-hold")
    assert running["spec"]["suspend"] is True
    # it waits in its ClusterQueue too: both queues' status and the metrics count it pending
    assert await agreeing(kadmit_lq, (1, 0, 0), queue="held") == (1, 0, 0)


STRICT = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: strict}
spec:
  namespaceSelector: {}
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu
      resources:
      - {name: cpu, nominalQuota: 2}
      - {name: memory, nominalQuota: 10Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: strict, namespace: default}
spec: {clusterQueue: strict}
"""


async def test_a_resumed_queue_leaves_no_waiting_workload_saying_it_is_stopped(kadmit_lq: WebhookEnv) -> None:
    """A StrictFIFO ClusterQueue tries its head only: the Workloads behind it are not evaluated
    when their LocalQueue (then their ClusterQueue) runs again, yet none may still say the queue
    is inactive; as Kueue's workload controller, kadmit tells them they are pending evaluation."""
    kube = kadmit_lq.kube
    await Applier(kube).apply_all([d for d in yaml.safe_load_all(STRICT) if d])
    await kube.create(JOBS, job("runner", cpu="2", parallelism=1, runtime="600s", queue="strict"))

    async def told() -> dict[str, tuple[str, str, str]]:
        return {
            wl["metadata"]["name"]: (
                (condition_of(wl, "QuotaReserved") or {}).get("status", ""),
                (condition_of(wl, "QuotaReserved") or {}).get("reason", ""),
                (condition_of(wl, "QuotaReserved") or {}).get("message", ""),
            )
            for wl in await workloads_of(kube, "default", "strict")
        }

    async def all_say(check: Any, count: int) -> dict[str, tuple[str, str, str]] | None:
        seen = await told()
        return seen if len(seen) == count and all(check(t) for t in seen.values()) else None

    await eventually(lambda: all_say(lambda t: t[0] == "True", 1), within=10, what="runner admitted")
    [runner] = (await told()).keys()

    def waiting(seen: dict[str, tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        return sorted(t for name, t in seen.items() if name != runner)

    for kind, resource, namespace, name in (
        ("LocalQueue", LOCAL_QUEUES, "default", "strict"),
        ("ClusterQueue", CLUSTER_QUEUES, None, "strict"),
    ):
        await kube.patch(resource, namespace, name, {"spec": {"stopPolicy": "Hold"}})
        if kind == "LocalQueue":
            for i in range(3):
                behind = job(f"behind-{i}", cpu="1", parallelism=1, runtime="600s", queue="strict")
                await kube.create(JOBS, behind)
        stopped = ("False", "Suspended", f"{kind} strict is inactive")
        await eventually(
            lambda stopped=stopped: all_say(lambda t: t == stopped or t[0] == "True", 4),
            within=10,
            what=f"every waiting Workload: {stopped}",
        )
        await kube.patch(resource, namespace, name, {"spec": {"stopPolicy": "None"}})

        def resumed(t: tuple[str, str, str]) -> bool:
            return t[0] == "True" or t[1] in ("WaitingForQuota", "PendingEvaluation")

        seen = await eventually(
            lambda: all_say(resumed, 4), within=10, what=f"{kind} resumed: no stale message"
        )
        # the head was evaluated (no room yet); the two behind it wait for their turn
        assert waiting(seen) == [
            ("False", "PendingEvaluation", "Workload is pending evaluation in the scheduling queue"),
            ("False", "PendingEvaluation", "Workload is pending evaluation in the scheduling queue"),
            ("False", "WaitingForQuota", NO_ROOM),
        ], seen
