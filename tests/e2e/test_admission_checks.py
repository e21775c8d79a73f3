"""An AdmissionCheck run by kadmit's built-in plugin: the Workload waits with its quota reserved until
the check is Ready, and only then is admitted and started (contract §3)."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import pytest
import yaml

from kadmit.controller import config as kadmit_config
from kadmit.controller.apply import Applier
from kadmit.kube import Resource
from kadmit.kube.resources import ADMISSION_CHECKS, CLUSTER_QUEUES, JOBS, WORKLOADS
from tests.e2e.conftest import WebhookEnv, eventually, fast_config, webhook_env
from tests.e2e.helpers import apply_small_setup, condition, job

Obj = dict[str, Any]
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas")

SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu}
spec: {nodeLabels: {kadmit.dev/pool: cpu}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: namespace-quota}
spec: {controllerName: kadmit.dev/resourcequota}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: checked}
spec:
  namespaceSelector: {}
  admissionChecksStrategy:
    admissionChecks: [{name: namespace-quota}]
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu
      resources: [{name: cpu, nominalQuota: 8}, {name: memory, nominalQuota: 8Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: checked, namespace: default}
spec: {clusterQueue: checked}
"""


async def workload_of(env: WebhookEnv, name: str) -> Obj | None:
    for wl in (await env.kube.list(WORKLOADS, "default"))["items"]:
        if any(ref.get("name") == name for ref in wl["metadata"].get("ownerReferences") or []):
            return wl  # type: ignore[no-any-return]
    return None


async def test_a_job_starts_only_once_its_admission_check_is_ready(kadmit: WebhookEnv) -> None:
    env = kadmit
    await Applier(env.kube).apply_all([d for d in yaml.safe_load_all(SETUP) if d])
    await env.kube.create(
        RESOURCE_QUOTAS,
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "team", "namespace": "default"},
            "spec": {"hard": {"requests.cpu": "2", "requests.memory": "4Gi"}},
        },
    )
    await env.kube.create(JOBS, job("fits", cpu="1", parallelism=2, runtime="200ms", queue="checked"))

    async def admitted() -> Obj | None:
        wl = await workload_of(env, "fits")
        return wl if wl is not None and condition(wl, "Admitted") == "True" else None

    wl = await eventually(admitted, within=20, what="admission after the check passed")
    [check] = wl["status"]["admissionChecks"]
    assert (check["name"], check["state"]) == ("namespace-quota", "Ready")

    async def complete() -> bool:
        return condition(await env.kube.get(JOBS, "default", "fits"), "Complete") == "True"

    await eventually(complete, what="the checked Job's completion")

    # 4 CPUs fit the ClusterQueue but not the namespace's ResourceQuota: quota is reserved,
    # the check never passes, the Job never starts.
    await env.kube.create(JOBS, job("too-big", cpu="2", parallelism=2, queue="checked"))

    async def checked() -> Obj | None:
        wl = await workload_of(env, "too-big")
        states = [c.get("state") for c in (wl or {}).get("status", {}).get("admissionChecks", [])]
        return (
            wl if (states and states != ["Pending"]) or (wl and condition(wl, "Evicted") == "True") else None
        )

    verdict = await eventually(checked, within=20, what="the check's verdict on the oversized Job")
    assert condition(verdict, "Admitted") != "True"
    assert (await env.kube.get(JOBS, "default", "too-big"))["spec"]["suspend"] is True


async def test_a_check_added_to_the_queue_later_is_added_without_evicting(kadmit: WebhookEnv) -> None:
    env = kadmit
    await apply_small_setup(env.kube)
    await env.kube.create(JOBS, job("early", cpu="1", parallelism=1, runtime="30s", queue="small"))

    async def admitted() -> Obj | None:
        wl = await workload_of(env, "early")
        return wl if wl is not None and condition(wl, "Admitted") == "True" else None

    await eventually(admitted, what="admitted without checks")
    await Applier(env.kube).apply_all(
        [d for d in yaml.safe_load_all(SETUP) if d and d["kind"] == "AdmissionCheck"]
    )
    await env.kube.patch(
        CLUSTER_QUEUES,
        None,
        "small",
        {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "namespace-quota"}]}}},
    )

    async def checked() -> Obj | None:
        wl = await workload_of(env, "early")
        names = [c["name"] for c in (wl or {}).get("status", {}).get("admissionChecks", [])]
        return wl if names == ["namespace-quota"] else None

    wl = await eventually(checked, what="the new check listed on the admitted Workload")
    assert condition(wl, "Admitted") == "True" and condition(wl, "Evicted") != "True"
    assert (await env.kube.get(JOBS, "default", "early"))["spec"]["suspend"] is False


MULTIKUEUE_CHECK = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: workers}
spec: {clusters: [absent-worker]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: multikueue}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: workers}
"""
CONTROLLERS = {"namespace-quota": "kadmit.dev/resourcequota", "multikueue": "kueue.x-k8s.io/multikueue"}


@pytest.mark.parametrize(
    ("block", "runs", "idle"),
    [
        ("{enabled: [resourcequota]}", "namespace-quota", "multikueue"),
        ("{disabled: [resourcequota]}", "multikueue", "namespace-quota"),
    ],
)
async def test_only_the_configured_check_plugins_run(block: str, runs: str, idle: str) -> None:
    """A plugin left out by ``admissionChecks`` is not started: its AdmissionCheck never gets an
    ``Active`` condition from kadmit (so, as in Kueue without that controller, its ClusterQueue stays
    inactive) and its Workloads get no verdict, while the running plugin's check is served."""
    document = yaml.safe_load(
        f"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nadmissionChecks: {block}\n"
    )
    chosen = kadmit_config.parse(document).admission_checks
    config = dataclasses.replace(fast_config(), admission_checks=chosen)
    async with contextlib.asynccontextmanager(webhook_env)(config=config) as env:
        assert env.app is not None and env.app.checks is not None
        running = {p.controller_name for p in env.app.checks.plugins}
        assert CONTROLLERS[runs] in running and CONTROLLERS[idle] not in running
        await Applier(env.kube).apply_all(
            [d for d in yaml.safe_load_all(SETUP + "---" + MULTIKUEUE_CHECK) if d]
        )
        checked = job("checked", cpu="1", parallelism=1, runtime="200ms", queue="checked")
        await env.kube.create(JOBS, checked)

        async def served() -> Obj | None:
            check = await env.kube.get(ADMISSION_CHECKS, None, runs)
            return check if condition(check, "Active") is not None else None

        await eventually(served, within=20, what=f"kadmit's Active condition on {runs}")
        if runs == "namespace-quota":
            async def admitted() -> Obj | None:
                wl = await workload_of(env, "checked")
                return wl if wl is not None and condition(wl, "Admitted") == "True" else None

            wl = await eventually(admitted, within=20, what="admission once the check passed")
            states = [(c["name"], c["state"]) for c in wl["status"]["admissionChecks"]]
            assert states == [("namespace-quota", "Ready")]
        else:
            async def inactive_queue() -> Obj | None:
                cq = await env.kube.get(CLUSTER_QUEUES, None, "checked")
                return cq if condition(cq, "Active") == "False" else None

            cq = await eventually(inactive_queue, what="the ClusterQueue inactive for want of its check")
            active = next(c for c in cq["status"]["conditions"] if c["type"] == "Active")
            assert active["reason"] == "AdmissionCheckInactive" and "namespace-quota" in active["message"]
            # the Job's Workload may be written after the ClusterQueue's status: wait for it
            wl = await eventually(lambda: workload_of(env, "checked"), what="the Job's Workload")
            assert condition(wl, "Admitted") != "True"
            assert not (wl.get("status") or {}).get("admissionChecks")
        idle_check = await env.kube.get(ADMISSION_CHECKS, None, idle)
        assert condition(idle_check, "Active") is None, idle_check.get("status")
