"""Faults in front of a LocalCluster: what a client sees, and the simulated controllers riding them out."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.watch import Watch

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.faults import FaultInjector
from kadmit.localcluster.sim import JobController, Kubelet, Scheduler

from .conftest import Obj, has_true, job_manifest, wait_for


async def test_watch_of_a_real_server_gets_the_forced_410(
    core: k8s.CoreV1Api, injector: FaultInjector
) -> None:
    listed = await core.list_namespaced_pod("default")
    injector.force_gone(2)
    with pytest.raises(ApiException) as caught:
        async with Watch() as watch:
            async for _ in watch.stream(core.list_namespaced_pod, "default",
                                        resource_version=listed.metadata.resource_version):
                pass
    assert caught.value.status == 410


async def test_real_watch_is_cut_by_drop_watches(core: k8s.CoreV1Api, injector: FaultInjector) -> None:
    streaming = asyncio.Event()

    async def watch_nodes() -> None:
        async with Watch() as watch:
            async for _ in watch.stream(core.list_node, timeout_seconds=30):
                streaming.set()  # the initial ADDED events prove the stream is open

    watcher = asyncio.create_task(watch_nodes())
    await asyncio.wait_for(streaming.wait(), 5)
    assert injector.drop_watches() >= 1
    with pytest.raises(aiohttp.ClientPayloadError):
        await asyncio.wait_for(watcher, 5)


async def test_paused_server_times_clients_out(core: k8s.CoreV1Api, injector: FaultInjector) -> None:
    injector.pause(10)
    with pytest.raises(asyncio.TimeoutError):
        await core.list_namespaced_pod("default", _request_timeout=0.3)
    injector.resume()
    await core.list_namespaced_pod("default", _request_timeout=2)


async def test_rate_limited_request_reaches_client_as_429(
    core: k8s.CoreV1Api, injector: FaultInjector
) -> None:
    injector.fail(1.0, 429, for_requests=1, retry_after=2)
    with pytest.raises(ApiException) as caught:
        await core.list_node()
    assert caught.value.status == 429 and caught.value.headers["Retry-After"] == "2"


async def test_jobs_complete_through_errors_gone_watches_and_drops(
    cluster: LocalCluster, batch: k8s.BatchV1Api, injector: FaultInjector
) -> None:
    informers = [i for a in cluster.addons if isinstance(a, JobController | Scheduler | Kubelet)
                 for i in a.informers]
    relists_before = sum(i.relists for i in informers)
    await asyncio.gather(*(batch.create_namespaced_job("default", job_manifest(
        f"rough-{i}", completions=2, runtime="100ms")) for i in range(5)))
    injector.force_gone(len(informers))
    assert injector.drop_watches() >= len(informers)  # every informer re-watches and meets a 410
    injector.fail(0.3, 500, for_seconds=1.5)
    await asyncio.sleep(1.6)  # the controllers work through the failing window on their own
    assert injector.counts.failed > 0
    done: set[str] = set()

    def all_done(job: Obj) -> bool:
        if has_true("Complete")(job):
            done.add(job["metadata"]["name"])
        return len(done) == 5

    await wait_for(batch.list_namespaced_job, all_done, within=20, namespace="default")
    assert injector.counts.gone >= 1
    assert sum(i.relists for i in informers) > relists_before


async def test_a_binding_cut_before_its_answer_is_tried_again(
    cluster: LocalCluster, batch: k8s.BatchV1Api, injector: FaultInjector
) -> None:
    """The scheduler's binding hangs and its connection is cut (no answer, nothing bound): the Pod
    is scheduled again, not left assumed bound for ever (a chaos run found Jobs stuck so)."""
    injector.hang(1.0, 0.2, verbs=["create"], resources=["pods/binding"], for_requests=1)
    await batch.create_namespaced_job("default", job_manifest("cut-binding", completions=1, runtime="100ms"))
    await wait_for(batch.list_namespaced_job, has_true("Complete"), within=15, namespace="default")
    assert injector.counts.hung == 1
