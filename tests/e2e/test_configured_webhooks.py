"""The Configuration reaches kadmit's webhooks: ``multiKueue.dispatcherName`` (the incremental
dispatcher lets a Workload's ``clusterName`` be only a nominated worker) and the
``PartialAdmission`` gate (without it the Workload defaulter drops ``minCount``)."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import aiohttp
import pytest
import yaml

from kadmit.controller import config as kadmit_config
from kadmit.kube import ApiError
from kadmit.kube.resources import WORKLOADS
from tests.e2e.conftest import fast_config, webhook_env

Obj = dict[str, Any]
HEADER = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
INCREMENTAL = HEADER + """
multiKueue: {dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental}
featureGates: {PartialAdmission: false}
"""
WORKLOAD = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: dispatched, namespace: default}
spec:
  queueName: nowhere
  podSets:
  - name: main
    count: 3
    minCount: 1
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: main
          image: busybox
          resources: {requests: {cpu: "1"}}
"""
NOT_NOMINATED = "when setting clusterName it must be one of the nominatedClusterNames"


@pytest.mark.parametrize("text", [HEADER, INCREMENTAL], ids=["defaults", "incremental-no-partial-admission"])
async def test_dispatcher_and_partial_admission_reach_the_workload_webhooks(text: str) -> None:
    parsed = kadmit_config.parse(yaml.safe_load(text))
    config = dataclasses.replace(
        fast_config(),
        multikueue_dispatcher=parsed.multikueue_dispatcher,
        partial_admission=parsed.partial_admission,
    )
    async with contextlib.asynccontextmanager(webhook_env)(config=config) as env:
        created = await env.kube.create(WORKLOADS, yaml.safe_load(WORKLOAD))
        [pod_set] = created["spec"]["podSets"]
        assert ("minCount" in pod_set) is parsed.partial_admission

        async def set_status(**status: Any) -> Obj:
            # a merge patch: kadmit writes this Workload's conditions meanwhile (its queue is absent)
            return await env.kube.patch(WORKLOADS, "default", "dispatched", {"status": status},
                                        subresource="status")

        # A dispatcher (here: the test) picks a worker that was never nominated.
        try:
            await set_status(clusterName="worker-2")
        except ApiError as exc:
            assert parsed.incremental_dispatch, exc
            assert exc.status == 403 and NOT_NOMINATED in str(exc), exc  # a webhook denial
        else:
            assert not parsed.incremental_dispatch, "the incremental dispatcher's rule was not applied"
            return
        # Nominated first, then chosen: allowed with the incremental dispatcher too.
        await set_status(nominatedClusterNames=["worker-1", "worker-2"])
        chosen = await set_status(nominatedClusterNames=None, clusterName="worker-2")
        assert chosen["status"]["clusterName"] == "worker-2"


MULTIKUEUE = HEADER + """
namespace: kadmit-system
multiKueue:
  gcInterval: 2m
  origin: team-a-manager
  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental
  incrementalDispatcherConfig: {stepSize: 2}
"""


async def test_the_configuration_reaches_the_multikueue_check_and_its_metrics_kadmits_endpoint() -> None:
    """kadmit builds its check plugins from the Configuration file it runs with, and their
    metrics go to kadmit's one registry (served on ``/metrics``)."""
    from kadmit.checks.multikueue import INCREMENTAL as INCREMENTAL_NAME
    from kadmit.checks.multikueue import MultiKueueCheck

    parsed = kadmit_config.parse(yaml.safe_load(MULTIKUEUE))
    config = dataclasses.replace(fast_config(), document=parsed.document,
                                 multikueue_dispatcher=parsed.multikueue_dispatcher)
    async with contextlib.asynccontextmanager(webhook_env)(config=config) as env:
        assert env.app is not None and env.app.checks is not None
        [plugin] = [p for p in env.app.checks.plugins if isinstance(p, MultiKueueCheck)]
        settings = plugin.settings
        assert (settings.gc_interval, settings.origin) == (120.0, "team-a-manager")
        assert settings.incremental_step == 2
        assert settings.dispatcher == INCREMENTAL_NAME and settings.namespace == "kadmit-system"
        assert plugin.metrics.registry is env.app.metrics.registry
        url = f"http://127.0.0.1:{env.app.metrics_port}/metrics"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            text = await response.text()
        assert "# TYPE multikueue_workloads_dispatched_total counter" in text
