"""ConcurrentAdmission on the local cluster (feature gate on): a Job in a ClusterQueue with a
``concurrentAdmissionPolicy`` and two flavors, the preferred one full, starts on the second; once
the preferred one frees up it migrates there under TryPreferredFlavors, and stays under
RetainFirstAdmission.

The preferred flavor ``reserved`` (3 cpu) is taken by a 3-cpu Job that fits nowhere else
(``fallback`` has 2 cpu); the 2-cpu Job ``mover`` can only start on ``fallback``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml

from kadmit.controller.apply import Applier
from kadmit.engine.concurrent_admission import ALLOWED_FLAVORS_ANNOTATION, PARENT_LABEL, PREEMPTION_GATE
from kadmit.kube.resources import ADMISSION_CHECKS, CLUSTER_QUEUES, JOBS, WORKLOADS
from kadmit.kube.writes import update_status
from tests.e2e.conftest import Env, eventually, fast_config
from tests.e2e.helpers import condition, is_admitted, is_complete, is_running, job, wait_job, wait_workload

Obj = dict[str, Any]
WAIT = 60.0  # generous: the machine is shared


def setup(mode: str, preemption: str = "Never") -> list[Obj]:
    text = f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {{name: low}}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {{name: high}}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: reserved}}
spec: {{nodeLabels: {{kadmit.dev/pool: cpu}}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: fallback}}
spec: {{nodeLabels: {{kadmit.dev/pool: cpu}}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: concurrent}}
spec:
  namespaceSelector: {{}}
  preemption: {{withinClusterQueue: {preemption}}}
  concurrentAdmissionPolicy:
    migration: {{mode: {mode}}}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: reserved
      resources:
      - {{name: cpu, nominalQuota: 3}}
      - {{name: memory, nominalQuota: 10Gi}}
    - name: fallback
      resources:
      - {{name: cpu, nominalQuota: 2}}
      - {{name: memory, nominalQuota: 10Gi}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: concurrent, namespace: default}}
spec: {{clusterQueue: concurrent}}
"""
    return [d for d in yaml.safe_load_all(text) if d]


def flavor_of(wl: Obj) -> str | None:
    assignments = ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    return str(assignments[0]["flavors"]["cpu"]) if assignments else None


async def variants_of(env: Env, parent: Obj) -> dict[str, Obj]:
    """The parent's variants, by flavor."""
    uid = parent["metadata"]["uid"]
    items = (await env.kube.list(WORKLOADS, "default"))["items"]
    return {
        w["metadata"]["annotations"][ALLOWED_FLAVORS_ANNOTATION]: w
        for w in items
        if any(
            ref.get("uid") == uid and ref.get("kind") == "Workload"
            for ref in w["metadata"].get("ownerReferences") or []
        )
    }


async def start_on_fallback(env: Env, mode: str) -> Obj:
    """The blocker runs on ``reserved``; ``mover`` is admitted on ``fallback`` and runs."""
    await env.start_manager(fast_config(concurrent_admission=True))
    await Applier(env.kube).apply_all(setup(mode))
    await env.kube.create(JOBS, job("blocker", cpu="3", parallelism=1, runtime="4s", queue="concurrent"))
    blocker = await wait_workload(env, "blocker", lambda w: is_admitted(w), "admitted", within=WAIT)
    assert flavor_of(blocker) == "reserved"
    assert blocker["metadata"]["labels"][PARENT_LABEL] == "true"
    await wait_job(env, "blocker", is_running, "started", within=WAIT)
    await env.kube.create(JOBS, job("mover", cpu="2", parallelism=1, runtime="30s", queue="concurrent"))
    mover = await wait_workload(
        env,
        "mover",
        lambda w: is_admitted(w) and flavor_of(w) == "fallback",
        "admitted on fallback",
        within=WAIT,
    )
    await wait_job(env, "mover", is_running, "started on fallback", within=WAIT)
    variants = await variants_of(env, mover)
    assert sorted(variants) == ["fallback", "reserved"]
    assert is_admitted(variants["fallback"]) and flavor_of(variants["fallback"]) == "fallback"
    for variant in variants.values():  # owned by the parent, a copy of its spec
        [owner] = variant["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == (
            "Workload",
            mover["metadata"]["name"],
            True,
        )
        assert variant["spec"]["podSets"] == mover["spec"]["podSets"]
        assert PARENT_LABEL not in (variant["metadata"].get("labels") or {})
        assert variant["spec"]["preemptionGates"] == [{"name": PREEMPTION_GATE}]

    async def gates_closed() -> bool:  # the workload controller records the gates' state
        states = [
            (v.get("status") or {}).get("preemptionGates") for v in (await variants_of(env, mover)).values()
        ]
        return all(s and s[0]["name"] == PREEMPTION_GATE and s[0]["position"] == "Closed" for s in states)

    await eventually(gates_closed, within=WAIT, what="the variants' preemption gates recorded Closed")
    return mover


@pytest.mark.timeout(240)
async def test_try_preferred_flavors_migrates_to_the_freed_preferred_flavor(env: Env) -> None:
    mover = await start_on_fallback(env, "TryPreferredFlavors")
    # the reserved variant keeps trying while the job runs on fallback
    assert (await variants_of(env, mover))["reserved"]["spec"].get("active", True) is True
    await wait_job(env, "blocker", is_complete, "complete", within=WAIT)
    migrated = await wait_workload(
        env,
        "mover",
        lambda w: is_admitted(w) and flavor_of(w) == "reserved" and condition(w, "Evicted") == "False",
        "admitted again, on reserved",
        within=WAIT,
    )
    stats = {e["reason"]: e["count"] for e in migrated["status"]["schedulingStats"]["evictions"]}
    assert stats == {"VariantEvicted": 1}
    await wait_job(env, "mover", is_running, "running again after the migration", within=WAIT)

    async def fallback_done() -> Obj | None:
        variant = (await variants_of(env, migrated))["fallback"]
        return variant if variant["spec"].get("active") is False else None

    fallback = await eventually(fallback_done, within=WAIT, what="the fallback variant deactivated")
    evictions = {e["reason"] for e in fallback["status"]["schedulingStats"]["evictions"]}
    assert "FlavorMigration" in evictions
    assert (fallback["status"].get("admission") or None) is None  # its quota was given back
    await env.kube.delete(JOBS, "default", "mover", propagation_policy="Background")


@pytest.mark.timeout(240)
async def test_retain_first_admission_stays_on_the_first_flavor(env: Env) -> None:
    mover = await start_on_fallback(env, "RetainFirstAdmission")

    async def reserved_deactivated() -> bool:
        return (await variants_of(env, mover))["reserved"]["spec"].get("active") is False

    await eventually(reserved_deactivated, within=WAIT, what="the reserved variant deactivated")
    await wait_job(env, "blocker", is_complete, "complete", within=WAIT)
    await asyncio.sleep(3)  # the preferred flavor is free: nothing moves
    parent = await wait_workload(env, "mover", lambda w: True, "read")
    assert is_admitted(parent) and flavor_of(parent) == "fallback"
    assert condition(parent, "Evicted") is None
    assert (await env.kube.get(JOBS, "default", "mover"))["spec"]["suspend"] is False
    await env.kube.delete(JOBS, "default", "mover", propagation_policy="Background")


@pytest.mark.timeout(240)
async def test_one_variant_at_a_time_preempts_through_its_preemption_gate(env: Env) -> None:
    """Both flavors are full of low-priority Jobs; a high-priority Job's two variants both need
    to preempt and are gated; the controller opens the gate of the preferred flavor's variant
    only, which preempts there: the Job on the other flavor keeps running."""
    await env.start_manager(fast_config(concurrent_admission=True))
    await Applier(env.kube).apply_all(setup("RetainFirstAdmission", preemption="LowerPriority"))
    await env.kube.create(
        JOBS, job("fill-a", cpu="3", parallelism=1, runtime="60s", queue="concurrent", priority_class="low")
    )
    await wait_workload(env, "fill-a", lambda w: flavor_of(w) == "reserved" and is_admitted(w), "on reserved")
    await env.kube.create(
        JOBS, job("fill-b", cpu="2", parallelism=1, runtime="60s", queue="concurrent", priority_class="low")
    )
    await wait_workload(env, "fill-b", lambda w: flavor_of(w) == "fallback" and is_admitted(w), "on fallback")
    await env.kube.create(
        JOBS, job("urgent", cpu="2", parallelism=1, runtime="30s", queue="concurrent", priority_class="high")
    )
    urgent = await wait_workload(
        env,
        "urgent",
        lambda w: is_admitted(w) and flavor_of(w) == "reserved",
        "admitted on reserved after preempting there",
        within=WAIT,
    )
    variants = await variants_of(env, urgent)
    opened = [
        f
        for f, v in variants.items()
        if ((v.get("status") or {}).get("preemptionGates") or [{}])[0].get("position") == "Open"
    ]
    assert opened == ["reserved"]
    fallback = variants["fallback"]
    # it was blocked on its closed gate (the condition is set only so), and is deactivated now
    # (RetainFirstAdmission), which sets it back to False as Kueue's eviction does
    kinds = {c["type"]: c for c in fallback["status"]["conditions"]}
    assert "BlockedOnPreemptionGates" in kinds and fallback["spec"]["active"] is False
    fill_a = await wait_workload(env, "fill-a", lambda w: condition(w, "Evicted") is not None, "read")
    assert any(e["reason"] == "VariantEvicted" for e in fill_a["status"]["schedulingStats"]["evictions"])
    fill_b = await wait_workload(env, "fill-b", lambda w: True, "read")
    assert is_admitted(fill_b) and flavor_of(fill_b) == "fallback" and condition(fill_b, "Evicted") is None
    await wait_job(env, "urgent", is_running, "started", within=WAIT)
    for name in ("fill-a", "fill-b", "urgent"):
        await env.kube.delete(JOBS, "default", name, propagation_policy="Background")


LAST_ACCEPTABLE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: reservation}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: on-demand}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: concurrent}
spec:
  namespaceSelector: {}
  concurrentAdmissionPolicy:
    migration:
      mode: TryPreferredFlavors
      constraints: {lastAcceptableFlavorName: reservation}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: reservation
      resources: [{name: cpu, nominalQuota: 0}, {name: memory, nominalQuota: 10Gi}]
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 0}, {name: memory, nominalQuota: 10Gi}]
    - name: spot
      resources: [{name: cpu, nominalQuota: 5}, {name: memory, nominalQuota: 10Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: concurrent, namespace: default}
spec: {clusterQueue: concurrent}
"""


async def set_cpu_quota(env: Env, flavor: str, cpu: str) -> None:
    cq = await env.kube.get(CLUSTER_QUEUES, None, "concurrent")
    for entry in cq["spec"]["resourceGroups"][0]["flavors"]:
        if entry["name"] == flavor:
            entry["resources"][0]["nominalQuota"] = cpu
    await env.kube.replace(CLUSTER_QUEUES, cq)


@pytest.mark.timeout(240)
async def test_migration_only_to_flavors_at_or_above_the_last_acceptable_one(env: Env) -> None:
    """Kueue's integration test "should only migrate to flavors at or above the minimum preferred
    flavor", with a Job: on spot, it does not move when on-demand frees up (below
    ``lastAcceptableFlavorName: reservation``), and moves when reservation does."""
    await env.start_manager(fast_config(concurrent_admission=True))
    await Applier(env.kube).apply_all([d for d in yaml.safe_load_all(LAST_ACCEPTABLE) if d])
    await env.kube.create(JOBS, job("mover", cpu="1", parallelism=1, runtime="60s", queue="concurrent"))
    mover = await wait_workload(
        env, "mover", lambda w: is_admitted(w) and flavor_of(w) == "spot", "admitted on spot", within=WAIT
    )

    async def on_demand_inactive() -> bool:
        return (await variants_of(env, mover))["on-demand"]["spec"].get("active") is False

    await eventually(on_demand_inactive, within=WAIT, what="the on-demand variant deactivated")
    assert (await variants_of(env, mover))["reservation"]["spec"].get("active", True) is True
    await set_cpu_quota(env, "on-demand", "5")
    await asyncio.sleep(3)  # on-demand is free, but below the last acceptable flavor: nothing moves
    still = await wait_workload(env, "mover", lambda w: True, "read")
    assert flavor_of(still) == "spot" and condition(still, "Evicted") is None
    await set_cpu_quota(env, "reservation", "5")
    await wait_workload(
        env,
        "mover",
        lambda w: is_admitted(w) and flavor_of(w) == "reservation" and condition(w, "Evicted") == "False",
        "migrated to reservation",
        within=WAIT,
    )
    await wait_job(env, "mover", is_running, "running on reservation", within=WAIT)
    await env.kube.delete(JOBS, "default", "mover", propagation_policy="Background")


@pytest.mark.timeout(240)
async def test_a_flavor_added_to_the_cluster_queue_gets_its_variant(env: Env) -> None:
    """Kueue's integration test "creates a variant for a flavor added to the ClusterQueue"."""
    await env.start_manager(fast_config(concurrent_admission=True))
    await Applier(env.kube).apply_all([d for d in yaml.safe_load_all(LAST_ACCEPTABLE) if d])
    await env.kube.create(JOBS, job("mover", cpu="1", parallelism=1, runtime="60s", queue="concurrent"))
    mover = await wait_workload(env, "mover", lambda w: is_admitted(w), "admitted", within=WAIT)
    await Applier(env.kube).apply_all(
        [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "extra"}}]
    )
    cq = await env.kube.get(CLUSTER_QUEUES, None, "concurrent")
    cq["spec"]["resourceGroups"][0]["flavors"].append(
        {
            "name": "extra",
            "resources": [{"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "1Gi"}],
        }
    )
    await env.kube.replace(CLUSTER_QUEUES, cq)

    async def four_variants() -> bool:
        return sorted(await variants_of(env, mover)) == ["extra", "on-demand", "reservation", "spot"]

    await eventually(four_variants, within=WAIT, what="a variant for the added flavor")
    await env.kube.delete(JOBS, "default", "mover", propagation_policy="Background")


AC_SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: ac}
spec: {controllerName: example.com/ac-controller}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: reservation}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: provreq-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-ac}
spec:
  namespaceSelector: {}
  concurrentAdmissionPolicy: {migration: {mode: TryPreferredFlavors}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: reservation, resources: [{name: cpu, nominalQuota: 0}]}
    - {name: provreq-flavor, resources: [{name: cpu, nominalQuota: 5}]}
  admissionChecksStrategy:
    admissionChecks: [{name: ac, onFlavors: [provreq-flavor]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq-ac}
"""


@pytest.mark.timeout(240)
async def test_parent_waits_for_its_variants_admission_checks(env: Env) -> None:
    """Kueue's integration test "Should wait for variant admission checks before admitting parent
    workload": the variant reserves on the checked flavor, the parent is admitted (without
    checks of its own) only once the variant's check is Ready."""
    await env.start_manager(fast_config(concurrent_admission=True))
    await Applier(env.kube).apply_all([d for d in yaml.safe_load_all(AC_SETUP) if d])
    ac = await env.kube.get(ADMISSION_CHECKS, None, "ac")
    ac["status"] = {
        "conditions": [
            {
                "type": "Active",
                "status": "True",
                "reason": "Active",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    await env.kube.replace_status(ADMISSION_CHECKS, ac)
    containers = [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]
    parent = await env.kube.create(
        WORKLOADS,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "parent-wl-ac", "namespace": "default"},
            "spec": {
                "queueName": "lq",
                "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": containers}}}],
            },
        },
    )

    async def reserving_variant() -> Obj | None:
        variant = (await variants_of(env, parent)).get("provreq-flavor")
        if variant is None or condition(variant, "QuotaReserved") != "True":
            return None
        return variant

    variant = await eventually(reserving_variant, within=WAIT, what="the provreq-flavor variant reserving")
    assert not is_admitted(variant)
    assert [c["name"] for c in variant["status"]["admissionChecks"]] == ["ac"]
    await asyncio.sleep(2)
    assert not is_admitted(await env.kube.get(WORKLOADS, "default", "parent-wl-ac"))

    def check_ready(status: Obj) -> bool:
        # As Kueue's util.SetWorkloadsAdmissionCheck: written until it lands, whatever kadmit
        # wrote on the variant meanwhile (a 409 reads it again).
        for check in status.get("admissionChecks") or []:
            if check["name"] == "ac":
                check.update(state="Ready", message="Admission check succeeded")
                return True
        return False

    await update_status(env.kube, WORKLOADS, variant, check_ready)

    async def parent_admitted() -> Obj | None:
        current = await env.kube.get(WORKLOADS, "default", "parent-wl-ac")
        return current if is_admitted(current) else None

    admitted = await eventually(parent_admitted, within=WAIT, what="the parent admitted")
    assert flavor_of(admitted) == "provreq-flavor"
    assert not admitted["status"].get("admissionChecks")
    assert admitted["metadata"]["labels"][PARENT_LABEL] == "true"


@pytest.mark.timeout(240)
async def test_the_parent_is_readmitted_on_a_remaining_flavor(env: Env) -> None:
    """Kueue's integration test "re-admits the parent on a remaining flavor", with a Job: its
    admitted flavor leaves the ClusterQueue, the variant there is deleted, the Job is stopped and
    starts again on the flavor that remains."""
    await env.start_manager(fast_config(concurrent_admission=True))
    await Applier(env.kube).apply_all(setup("TryPreferredFlavors"))
    await set_cpu_quota(env, "fallback", "0")
    await env.kube.create(JOBS, job("mover", cpu="1", parallelism=1, runtime="60s", queue="concurrent"))
    mover = await wait_workload(
        env,
        "mover",
        lambda w: is_admitted(w) and flavor_of(w) == "reserved",
        "admitted on reserved",
        within=WAIT,
    )
    await wait_job(env, "mover", is_running, "started", within=WAIT)
    reserved_variant = (await variants_of(env, mover))["reserved"]["metadata"]["name"]
    cq = await env.kube.get(CLUSTER_QUEUES, None, "concurrent")
    flavors = cq["spec"]["resourceGroups"][0]["flavors"]
    cq["spec"]["resourceGroups"][0]["flavors"] = [f for f in flavors if f["name"] == "fallback"]
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "5"
    await env.kube.replace(CLUSTER_QUEUES, cq)

    async def variant_gone() -> bool:
        return reserved_variant not in {
            v["metadata"]["name"] for v in (await variants_of(env, mover)).values()
        }

    await eventually(variant_gone, within=WAIT, what="the reserved variant deleted")
    readmitted = await wait_workload(
        env,
        "mover",
        lambda w: is_admitted(w) and flavor_of(w) == "fallback" and condition(w, "Evicted") == "False",
        "admitted again, on fallback",
        within=WAIT,
    )
    stats = {e["reason"] for e in readmitted["status"]["schedulingStats"]["evictions"]}
    assert stats == {"ConcurrentAdmission"}
    await wait_job(env, "mover", is_running, "running on fallback", within=WAIT)
    await env.kube.delete(JOBS, "default", "mover", propagation_policy="Background")
