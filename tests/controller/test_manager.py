"""The manager's wiring from the configuration: integrations and the engine's Fair Sharing."""

from __future__ import annotations

import dataclasses

from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client import Configuration as ClientConfiguration

from kadmit.controller.config import Configuration
from kadmit.controller.manager import Manager
from kadmit.kube import Client


async def test_configuration_reaches_the_engine_and_the_integrations() -> None:
    async with ApiClient(ClientConfiguration(host="http://127.0.0.1:9")) as api_client:
        client = Client(api_client)
        plain = Manager(client, Configuration())
        assert not plain.engine.fair_sharing
        assert [i.kind for i in plain.integrations] == ["Job"]
        fair = Manager(client, dataclasses.replace(
            Configuration(), fair_sharing_strategies=("LessThanInitialShare",),
            frameworks=("batch/job", "jobset.x-k8s.io/jobset")))
        assert fair.engine.fair_sharing
        assert fair.engine.preemption_strategies == ("LessThanInitialShare",)
        assert [i.kind for i in fair.integrations] == ["Job", "JobSet"]
        assert len(fair.job_reconcilers) == 2


async def test_group_kind_concurrency_reaches_the_reconcilers() -> None:
    async with ApiClient(ClientConfiguration(host="http://127.0.0.1:9")) as api_client:
        client = Client(api_client)
        config = dataclasses.replace(
            Configuration(), frameworks=("batch/job", "jobset.x-k8s.io/jobset", "pod"),
            group_kind_concurrency={"Job.batch": 7, "Pod": 3, "Workload.kueue.x-k8s.io": 9})
        manager = Manager(client, config)
        workers = {r.integration.kind: r.workers.count for r in manager.job_reconcilers}
        assert workers == {"Job": 7, "JobSet": 4}  # JobSet not named: kadmit's default
        assert [(r.integration.kind, r.workers.count) for r in manager.group_reconcilers] == [("Pod", 3)]
        assert manager.workload_reconciler.workers.count == 9
        assert Manager(client, Configuration()).workload_reconciler.workers.count == 2
