"""WaitForPodsReady: pods that never get ready are evicted after the timeout, requeued after the
backoff, and the Workload is deactivated once the requeue limit is reached (contract §5.7)."""

from __future__ import annotations

import dataclasses

import yaml

from kadmit.controller.config import RequeuingStrategy, WaitForPodsReady
from kadmit.kube.resources import JOBS
from tests.e2e.conftest import Env, fast_config
from tests.e2e.helpers import condition_of, is_stopped, job, wait_job, wait_workload

# A flavor whose nodes do not exist: the Job is admitted, but its pods never get scheduled.
GHOST_SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: ghost}
spec:
  nodeLabels: {kadmit.dev/pool: ghost}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: ghost}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: ghost
      resources:
      - {name: cpu, nominalQuota: 8}
      - {name: memory, nominalQuota: 8Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: ghost, namespace: default}
spec: {clusterQueue: ghost}
"""


async def test_timeout_evicts_requeues_with_backoff_then_deactivates(env: Env) -> None:
    wfpr = WaitForPodsReady(
        timeout=1.0,
        recovery_timeout=1.0,
        requeuing_strategy=RequeuingStrategy(
            backoff_limit_count=1, backoff_base_seconds=1, backoff_max_seconds=2
        ),
    )
    await env.start_manager(dataclasses.replace(fast_config(), wait_for_pods_ready=wfpr))
    await env.applier.apply_all([d for d in yaml.safe_load_all(GHOST_SETUP) if d])
    await env.kube.create(JOBS, job("stuck", queue="ghost"))

    def timed_out(wl: dict) -> bool:  # type: ignore[type-arg]
        evicted = condition_of(wl, "Evicted")
        return evicted is not None and evicted["reason"] == "PodsReadyTimeout"

    first = await wait_workload(env, "stuck", timed_out, "evicted for PodsReadyTimeout")
    assert first["status"]["requeueState"]["count"] == 1
    assert condition_of(first, "Evicted")["message"].startswith("Exceeded the PodsReady timeout default/")  # type: ignore[index]
    pods_ready = condition_of(first, "PodsReady")
    assert pods_ready is not None and pods_ready["reason"] == "WaitForStart"

    def deactivated(wl: dict) -> bool:  # type: ignore[type-arg]
        evicted = condition_of(wl, "Evicted")
        return (
            wl["spec"].get("active") is False
            and evicted is not None
            and evicted["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
        )

    final = await wait_workload(env, "stuck", deactivated, "deactivated after the second timeout", within=20)
    # The second timeout can only come after a requeue (Requeued=True/BackoffFinished at requeueAt)
    # and a second admission; it is the one that reaches the limit of 1.
    stats = {
        (e["reason"], e.get("underlyingCause", "")): e["count"]
        for e in final["status"]["schedulingStats"]["evictions"]
    }
    assert stats[("PodsReadyTimeout", "WaitForStart")] == 1
    assert stats[("DeactivatedDueToRequeuingLimitExceeded", "RequeuingLimitExceeded")] == 1
    assert "requeueState" not in final["status"]  # cleared at deactivation
    await wait_job(env, "stuck", is_stopped, "suspended again")


async def test_block_admission_waits_for_the_admitted_pods(env: Env) -> None:
    wfpr = WaitForPodsReady(timeout=30.0, recovery_timeout=30.0, block_admission=True)
    await env.start_manager(dataclasses.replace(fast_config(), wait_for_pods_ready=wfpr))
    await env.applier.apply_all([d for d in yaml.safe_load_all(GHOST_SETUP) if d])
    await env.kube.create(JOBS, job("first", cpu="1", parallelism=1, queue="ghost"))
    await wait_workload(
        env,
        "first",
        lambda w: (condition_of(w, "Admitted") or {}).get("status") == "True",
        "the first admitted",
    )
    await env.kube.create(JOBS, job("second", cpu="1", parallelism=1, queue="ghost"))

    def blocked(wl: dict) -> bool:  # type: ignore[type-arg]
        reserved = condition_of(wl, "QuotaReserved")
        return (
            reserved is not None
            and reserved["status"] == "False"
            and reserved["reason"] == "WaitingForPodsReady"
        )

    await wait_workload(env, "second", blocked, "held while the first one's pods are not ready")
