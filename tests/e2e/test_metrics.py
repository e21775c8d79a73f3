"""Prometheus metrics with Kueue's names and labels, scraped over HTTP after real admissions."""

from __future__ import annotations

import dataclasses
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from controller.kube import JOBS
from controller.manager import Manager
from controller.metrics import Metrics, metrics_app
from tests.e2e.conftest import Env, fast_config
from tests.e2e.helpers import apply_small_setup, is_complete, is_running, job, wait_job


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    found: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(found: dict[Any, float], metric: str, **labels: str) -> float:
    labels.setdefault("replica_role", "standalone")
    return found[(metric, frozenset(labels.items()))]


async def test_admissions_preemptions_and_queue_gauges(env: Env) -> None:
    metrics = Metrics()
    config = dataclasses.replace(fast_config(), enable_cluster_queue_resources=True)
    manager = Manager(env.client, config, observer=metrics)
    metrics.bind(manager)
    await manager.start()
    env.managers.append(manager)
    await apply_small_setup(env)
    await env.kube.create(
        JOBS, job("low", cpu="2", parallelism=2, runtime="20s", queue="small", priority_class="low")
    )
    await wait_job(env, "low", is_running, "started")
    await env.kube.create(
        JOBS, job("high", cpu="2", parallelism=2, runtime="200ms", queue="small", priority_class="high")
    )
    await wait_job(env, "high", is_complete, "complete")
    await wait_job(env, "low", is_running, "re-admitted after the preemption")
    async with TestClient(TestServer(metrics_app(metrics))) as client:
        response = await client.get("/metrics")
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        found = samples(await response.text())
    # admitted, preempted, admitted again: Kueue counts both admissions
    assert value(found, "kueue_admitted_workloads_total", cluster_queue="small", priority_class="low") == 2
    assert value(found, "kueue_admitted_workloads_total", cluster_queue="small", priority_class="high") == 1
    assert (
        value(found, "kueue_quota_reserved_workloads_total", cluster_queue="small", priority_class="high")
        == 1
    )
    assert (
        value(
            found,
            "kueue_preempted_workloads_total",
            preempting_cluster_queue="small",
            reason="InClusterQueue",
        )
        == 1
    )
    assert (
        value(
            found,
            "kueue_evicted_workloads_total",
            cluster_queue="small",
            reason="Preempted",
            underlying_cause="",
            priority_class="low",
        )
        == 1
    )
    assert (
        value(found, "kueue_admission_wait_time_seconds_count", cluster_queue="small", priority_class="high")
        == 1
    )
    assert value(found, "kueue_admission_attempts_total", result="success") >= 2
    assert value(found, "kueue_finished_workloads_total", cluster_queue="small", priority_class="high") == 1
    assert (
        value(
            found,
            "kueue_admitted_until_ready_wait_time_seconds_count",
            cluster_queue="small",
            priority_class="high",
        )
        == 1
    )
    assert (
        value(found, "kueue_cluster_queue_info", cluster_queue="small", parent_cohort="", root_cohort="") == 1
    )
    assert any(name == "kueue_build_info" for name, _ in found)
    assert (
        value(found, "kueue_execution_time_seconds_count", cluster_queue="small", priority_class="high") == 1
    )
    assert value(found, "kueue_cluster_queue_status", cluster_queue="small", status="active") == 1
    assert (
        value(
            found,
            "kueue_cluster_queue_nominal_quota",
            cohort="",
            cluster_queue="small",
            flavor="cpu",
            resource="cpu",
        )
        == 4
    )
    pending = sum(
        value(found, "kueue_pending_workloads", cluster_queue="small", status=s)
        for s in ("active", "inadmissible")
    )
    reserving = value(found, "kueue_reserving_active_workloads", cluster_queue="small")
    assert (pending, reserving) == (0, 1)
    assert (
        value(
            found,
            "kueue_local_queue_admitted_workloads_total",
            name="small",
            namespace="default",
            priority_class="high",
        )
        == 1
    )
