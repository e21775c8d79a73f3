"""The whole product: ``kadmit local`` schedules, the ProvisioningRequest check books, the Job runs.

Kueue's own ``provisioning-setup.yaml`` sample is applied unchanged; the check runner runs as an
external controller would, over the kubeconfig ``kadmit local`` writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client, config

from checks.api import Api
from checks.kinds import KUEUE_GROUP, KUEUE_VERSION, PODS, PROVISIONING_REQUESTS, WORKLOADS, Kind
from checks.provisioning import CONSUME_ANNOTATION, ProvisioningCheck
from checks.runner import CheckRunner
from controller.commands.checks import InformerPool
from controller.informer import Informer
from localcluster.sim import RUNTIME_ANNOTATION
from tests.checks.conftest import JOBS, ROOT, has_state

Obj = dict[str, Any]
SAMPLE = ROOT / "manifests" / "samples" / "provisioning__provisioning-setup.yaml"  # Kueue's, unchanged
KINDS = {
    "ResourceFlavor": Kind(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", "ResourceFlavor", False),
    "ClusterQueue": Kind(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "ClusterQueue", False),
    "LocalQueue": Kind(KUEUE_GROUP, KUEUE_VERSION, "localqueues", "LocalQueue"),
    "AdmissionCheck": Kind(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", "AdmissionCheck", False),
    "ProvisioningRequestConfig": Kind(
        KUEUE_GROUP, KUEUE_VERSION, "provisioningrequestconfigs", "ProvisioningRequestConfig", False
    ),
}


def sample_documents() -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(SAMPLE.read_text()) if doc]


@contextlib.asynccontextmanager
async def kadmit_local(tmp_path: Path) -> AsyncIterator[str]:
    kubeconfig = tmp_path / "kubeconfig"
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("kadmit")),
        "local",
        "--kubeconfig",
        str(kubeconfig),
        "--no-samples",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), timeout=60.0)
        assert b"ready" in line, line
        yield str(kubeconfig)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=20.0)
            except TimeoutError:
                process.kill()
                await process.wait()


async def synced(pool: InformerPool, kind: Kind) -> Informer:
    informer = await pool(kind)
    await informer.wait_synced()
    return informer


def gpu_job() -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "gpu-job",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "suspend": True,
            "template": {
                "metadata": {"annotations": {RUNTIME_ANNOTATION: "0.5s"}},
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {
                                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                                "limits": {"nvidia.com/gpu": "1"},
                            },
                        }
                    ],
                },
            },
        },
    }


async def test_kueues_provisioning_sample_books_capacity_and_the_job_runs(tmp_path: Path) -> None:
    documents = sample_documents()
    async with kadmit_local(tmp_path) as kubeconfig:
        configuration = client.Configuration()
        await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        async with client.ApiClient(configuration) as api_client:
            api = Api(api_client)
            for doc in documents:
                await api.create(KINDS[doc["kind"]], doc)
            pool = InformerPool(api_client)
            runner = CheckRunner(api_client, [ProvisioningCheck()], watches=pool)
            await runner.start()
            try:
                await api.create(JOBS, gpu_job())
                jobs = await pool(JOBS)
                await jobs.wait_synced()
                done = asyncio.Event()
                jobs.add_handler(
                    lambda _, job, __: (
                        done.set()
                        if any(
                            c.get("type") == "Complete" and c.get("status") == "True"
                            for c in (job.get("status") or {}).get("conditions") or []
                        )
                        else None
                    )
                )
                await asyncio.wait_for(done.wait(), timeout=40.0)
                workloads = await synced(pool, WORKLOADS)
                [wl] = workloads.list("default")
                assert has_state("sample-prov", "Ready")(wl)
                pods = (await synced(pool, PODS)).list("default")
                request = f"{wl['metadata']['name']}-sample-prov-1"
                assert len(pods) == 2
                assert all(p["metadata"]["annotations"][CONSUME_ANNOTATION] == request for p in pods)
                # Finished: its request is cleaned up.
                requests = await synced(pool, PROVISIONING_REQUESTS)
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 20.0
                gone = asyncio.Event()
                requests.add_handler(lambda kind, obj, _: gone.set() if kind == "DELETED" else None)
                while requests.get("default", request) is not None and loop.time() < deadline:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(gone.wait(), timeout=1.0)
                assert requests.get("default", request) is None
            finally:
                await runner.stop()
                await pool.stop()
