"""Every metric family Kueue's ``pkg/metrics`` declares is in kadmit's ``/metrics`` (issue 13),
with the switches on: ``metrics.enableClusterQueueResources``, ``metrics.localQueueMetrics`` and
Fair Sharing, after admissions, a preemption and finishes in a cohort; plus prometheus_client's
process and Python collectors.

The list is written from Kueue's source (``pkg/metrics/metrics.go``, the variables ``Register``
and ``RegisterLQMetrics`` register), not from kadmit's declarations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from kadmit.controller.apply import Applier
from kadmit.kube.resources import JOBS
from tests.e2e.conftest import WebhookEnv, eventually, fast_config, webhook_env
from tests.e2e.helpers import condition, job

KUEUE_FAMILIES = (
    "kueue_admission_attempts_total",
    "kueue_admission_attempt_duration_seconds",
    "multikueue_workloads_dispatched_total",
    "multikueue_workloads_admitted_total",
    "kueue_admission_cycle_preemption_skips",
    "kueue_preemption_target_recomputations_total",
    "kueue_build_info",
    "kueue_pending_workloads",
    "kueue_pending_scheduling_hashes",
    "kueue_local_queue_pending_workloads",
    "kueue_finished_workloads",
    "kueue_local_queue_finished_workloads",
    "kueue_quota_reserved_workloads_total",
    "kueue_local_queue_quota_reserved_workloads_total",
    "kueue_finished_workloads_total",
    "kueue_local_queue_finished_workloads_total",
    "kueue_execution_time_seconds",
    "kueue_local_queue_execution_time_seconds",
    "kueue_quota_reserved_wait_time_seconds",
    "kueue_pods_ready_to_evicted_time_seconds",
    "kueue_local_queue_quota_reserved_wait_time_seconds",
    "kueue_admitted_workloads_total",
    "kueue_local_queue_admitted_workloads_total",
    "kueue_admission_wait_time_seconds",
    "kueue_ready_wait_time_seconds",
    "kueue_admitted_until_ready_wait_time_seconds",
    "kueue_local_queue_admission_wait_time_seconds",
    "kueue_admission_checks_wait_time_seconds",
    "kueue_local_queue_admission_checks_wait_time_seconds",
    "kueue_local_queue_ready_wait_time_seconds",
    "kueue_local_queue_admitted_until_ready_wait_time_seconds",
    "kueue_workload_creation_latency_seconds",
    "kueue_pod_scheduling_gate_removal_seconds",
    "kueue_evicted_workloads_total",
    "kueue_replaced_workload_slices_total",
    "kueue_local_queue_evicted_workloads_total",
    "kueue_evicted_workloads_once_total",
    "kueue_preempted_workloads_total",
    "kueue_workload_eviction_latency_seconds",
    "kueue_reserving_active_workloads",
    "kueue_local_queue_reserving_active_workloads",
    "kueue_admitted_active_workloads",
    "kueue_local_queue_admitted_active_workloads",
    "kueue_cluster_queue_status",
    "kueue_local_queue_status",
    "kueue_unadmitted_workloads",
    "kueue_local_queue_unadmitted_workloads",
    "kueue_cluster_queue_resource_reservation",
    "kueue_cluster_queue_resource_pending",
    "kueue_cluster_queue_resource_usage",
    "kueue_local_queue_resource_reservation",
    "kueue_local_queue_resource_usage",
    "kueue_local_queue_admission_fair_sharing_usage",
    "kueue_cluster_queue_nominal_quota",
    "kueue_cluster_queue_borrowing_limit",
    "kueue_cluster_queue_lending_limit",
    "kueue_cluster_queue_weighted_share",
    "kueue_cohort_weighted_share",
    "kueue_cohort_subtree_quota",
    "kueue_cohort_subtree_admitted_workloads_total",
    "kueue_cohort_subtree_resource_reservations",
    "kueue_cohort_subtree_admitted_active_workloads",
    "kueue_cohort_info",
    "kueue_cluster_queue_info",
)

WITHOUT_SERIES = {
    # mechanisms kadmit does not have: declared (a dashboard finds them), no series
    "kueue_admission_cycle_preemption_skips",  # no preemption skips within a cycle
    "kueue_preemption_target_recomputations_total",  # no recomputation of preemption targets
    "kueue_pod_scheduling_gate_removal_seconds",  # no plain-Pod integration / scheduling gates
    "kueue_local_queue_admission_fair_sharing_usage",  # no Admission Fair Sharing
    # series once an elastic Job is scaled up (tests/e2e/test_elastic_jobs.py): none here
    "kueue_replaced_workload_slices_total",
    # series only when MultiKueue dispatches to a worker cluster (none here)
    "multikueue_workloads_dispatched_total",
    "multikueue_workloads_admitted_total",
}

SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu}
spec:
  nodeLabels: {kadmit.dev/pool: cpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team}
spec: {parentName: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: busy}
spec:
  cohortName: team
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu
      resources:
      - {name: cpu, nominalQuota: 2, borrowingLimit: 0}
      - {name: memory, nominalQuota: 10Gi, lendingLimit: 5Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: busy, namespace: default}
spec: {clusterQueue: busy}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
"""


@pytest.fixture
async def switched_on() -> AsyncIterator[WebhookEnv]:
    config = dataclasses.replace(
        fast_config(),
        enable_cluster_queue_resources=True,
        local_queue_metrics=True,
        fair_sharing_strategies=("LessThanOrEqualToFinalShare", "LessThanInitialShare"),
    )
    async for env in webhook_env(config=config):
        await Applier(env.kube).apply_all([d for d in yaml.safe_load_all(SETUP) if d])
        yield env


async def job_state(env: WebhookEnv, name: str, kind: str) -> bool:
    return condition(await env.kube.get(JOBS, "default", name), kind) == "True"


async def test_every_kueue_metric_family_is_served(switched_on: WebhookEnv) -> None:
    env = switched_on
    assert len(KUEUE_FAMILIES) == 64 and len(set(KUEUE_FAMILIES)) == 64
    low = job("low", cpu="1", parallelism=2, runtime="30s", queue="busy", priority_class="low")
    await env.kube.create(JOBS, low)

    async def low_running() -> bool:
        current = await env.kube.get(JOBS, "default", "low")
        return current["spec"].get("suspend") is False and bool((current.get("status") or {}).get("ready"))

    await eventually(low_running, within=15, what="low running with its pods ready")
    high = job("high", cpu="1", parallelism=2, runtime="300ms", queue="busy", priority_class="high")
    await env.kube.create(JOBS, high)
    await eventually(lambda: job_state(env, "high", "Complete"), within=20, what="high completes")
    # one more that cannot fit while low runs again: pending, unadmitted, pending resources
    await env.kube.create(JOBS, job("waits", cpu="2", parallelism=1, runtime="300ms", queue="busy"))
    assert env.app is not None
    url = f"http://127.0.0.1:{env.app.metrics_port}/metrics"

    async def scrape() -> dict[str, int] | None:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            assert response.status == 200
            text = await response.text()
        declared = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
        found: dict[str, int] = {}
        for family in text_string_to_metric_families(text):
            for name in (family.name, f"{family.name}_total"):
                if name in declared:
                    found[name] = found.get(name, 0) + len(family.samples)
        for name in declared:
            found.setdefault(name, 0)
        ready = all(found.get(n) for n in KUEUE_FAMILIES if n not in WITHOUT_SERIES)
        return found if ready else None

    try:
        found = await eventually(scrape, within=15, what="a series of every family")
    except AssertionError:
        last = await _last(url)
        missing = [n for n in KUEUE_FAMILIES if n not in WITHOUT_SERIES and not last.get(n)]
        raise AssertionError(f"families without series: {missing}") from None
    assert [n for n in KUEUE_FAMILIES if n not in found] == []
    assert all(found[n] == 0 for n in WITHOUT_SERIES if n.startswith("kueue_")), found
    assert (
        found.get("process_cpu_seconds_total")
        and found.get("python_info")
        and found.get("python_gc_objects_collected_total")
    )
    assert not any(name.endswith("_created") for name in found if name.startswith("kueue_")), found


async def _last(url: str) -> dict[str, int]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for name in (family.name, f"{family.name}_total"):
            counts[name] = counts.get(name, 0) + len(family.samples)
    return counts
