"""Prometheus metrics with Kueue's names and labels, scraped over HTTP after real admissions."""

from __future__ import annotations

import dataclasses
from typing import Any

import aiohttp
import yaml
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from kadmit.controller.app import KadmitApp
from kadmit.controller.apply import Applier
from kadmit.controller.manager import Manager
from kadmit.controller.metrics import Metrics, metrics_app
from kadmit.kube.resources import JOBS
from tests.e2e.conftest import Env, WebhookEnv, eventually, fast_config
from tests.e2e.helpers import apply_small_setup, condition, is_complete, is_running, job, wait_job
from tests.e2e.test_admission_checks import SETUP as CHECKED_SETUP
from tests.e2e.test_admission_checks import workload_of

Obj = dict[str, Any]


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
    manager = Manager(env.kube, config, observer=metrics)
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


async def scrape(app: KadmitApp) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """kadmit's own ``/metrics`` over HTTP, as Prometheus reads it."""
    url = f"http://127.0.0.1:{app.metrics_port}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert response.status == 200
        return samples(await response.text())


def series(found: dict[Any, float], metric: str, **labels: str) -> float:
    """A series without ``replica_role`` (the webhook's and the checks' are not per role)."""
    return found[(metric, frozenset(labels.items()))]


async def test_webhook_and_check_metrics_share_kadmits_metrics_endpoint(kadmit: WebhookEnv) -> None:
    env = kadmit
    assert env.app is not None
    await Applier(env.kube).apply_all([d for d in yaml.safe_load_all(CHECKED_SETUP) if d])
    await env.kube.create(JOBS, job("checked", cpu="1", parallelism=1, runtime="200ms", queue="checked"))

    async def admitted() -> Obj | None:
        wl = await workload_of(env, "checked")
        return wl if wl is not None and condition(wl, "Admitted") == "True" else None

    await eventually(admitted, within=20, what="admission once the check passed")
    found = await scrape(env.app)
    mutate = "/mutate-batch-v1-job"
    # The Job's create went through the mutating webhook, answered 200 and allowed.
    assert series(found, "controller_runtime_webhook_requests_total", webhook=mutate, code="200") >= 1
    assert series(found, "controller_runtime_webhook_latency_seconds_count", webhook=mutate) >= 1
    assert series(found, "controller_runtime_webhook_requests_in_flight", webhook=mutate) == 0
    assert series(found, "kadmit_webhook_verdicts_total", webhook=mutate, allowed="true") >= 1
    controller = "kadmit.dev/resourcequota"
    evaluations = "kadmit_admission_check_evaluation_duration_seconds_count"
    assert series(found, "kadmit_admission_check_verdicts_total", controller=controller, state="Ready") >= 1
    assert series(found, evaluations, controller=controller) >= 1
    # timed on a clock finer than uvloop's, whose whole milliseconds made a quick evaluation take 0 s
    assert series(found, "kadmit_admission_check_evaluation_duration_seconds_sum", controller=controller) > 0
    assert series(found, "kadmit_admission_check_status_writes_total", result="written") >= 1
    # ... beside the scheduler's series, on the same registry
    assert value(found, "kueue_admitted_workloads_total", cluster_queue="checked", priority_class="") == 1
