"""Who may start a Job under ``kadmit local``: kadmit's ServiceAccount, never the user.

The first test runs the real ``kadmit local`` process and acts only with kubectl on the admin
kubeconfig it writes. The second builds the same setup in-process (kadmit on its
ServiceAccount token) so it can also act *as* service accounts, and shows the start guard
checks both who asks and whether the Workload is admitted.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kadmit.controller import local_setup
from kadmit.controller.app import KadmitApp
from kadmit.kube import Client
from kadmit.kube.resources import JOBS, ROLE_BINDINGS, WORKLOADS
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.sim import default_addons
from tests.e2e.conftest import eventually, fast_config, node_config
from tests.e2e.helpers import condition, job
from tests.kadmit_local import kadmit_local

Obj = dict[str, Any]
KADMIT_SA = "system:serviceaccount:kadmit-system:kadmit-controller-manager"
START = {"spec": {"suspend": False}}


def user_denial(name: str, user: str) -> str:
    return (
        f'admission webhook "vjob.kb.io" denied the request: Job default/{name} cannot be unsuspended '
        f"by {user}: kadmit starts it once its Workload is admitted"
    )


async def kubectl(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig), *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def kubectl_json(kubeconfig: Path, *args: str) -> Any:
    code, out, err = await kubectl(kubeconfig, *args, "-o", "json")
    assert code == 0, err
    return json.loads(out)


async def workload_of_job(kubeconfig: Path, name: str) -> Obj | None:
    listing = await kubectl_json(kubeconfig, "get", "workloads")
    for wl in listing["items"]:
        if any(ref.get("name") == name for ref in wl["metadata"].get("ownerReferences") or []):
            return wl  # type: ignore[no-any-return]
    return None


def job_manifest(name: str, cpu: str) -> str:
    return json.dumps(job(name, cpu=cpu, parallelism=1, runtime="200ms"))


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kadmit_local_starts_jobs_as_its_service_account_and_the_user_cannot(tmp_path: Path) -> None:
    async with kadmit_local(tmp_path) as local:
        kubeconfig = local.kubeconfig
        whoami = await kubectl_json(kubeconfig, "auth", "whoami")
        assert whoami["status"]["userInfo"]["username"] == "system:admin"
        sa = await kubectl_json(kubeconfig, "get", "serviceaccount", "-n", "kadmit-system",
                                "kadmit-controller-manager")
        assert sa["metadata"]["uid"]
        for name, cpu in (("too-big", "100"), ("fits", "1")):  # the sample queue has 32 + 16 cpu
            path = tmp_path / f"{name}.json"
            await asyncio.to_thread(path.write_text, job_manifest(name, cpu))
            code, _, err = await kubectl(kubeconfig, "create", "-f", str(path))
            assert code == 0, err

        async def pending() -> Obj | None:
            wl = await workload_of_job(kubeconfig, "too-big")
            return wl if wl is not None and condition(wl, "QuotaReserved") == "False" else None

        wl = await eventually(pending, what="too-big's Workload to be found inadmissible")
        assert condition(wl, "Admitted") != "True"
        code, _, err = await kubectl(kubeconfig, "patch", "job", "too-big", "-p", json.dumps(START))
        assert code == 1
        assert err.strip() == "Error from server (Forbidden): " + user_denial("too-big", "system:admin"), err
        assert (await kubectl_json(kubeconfig, "get", "job", "too-big"))["spec"]["suspend"] is True

        async def completed() -> Obj | None:
            found = await kubectl_json(kubeconfig, "get", "job", "fits")
            return found if condition(found, "Complete") == "True" else None

        # kadmit unsuspended it: the guard lets only its ServiceAccount do that, so the webhook
        # saw kadmit's writes as that ServiceAccount and the user's as system:admin.
        done = await eventually(completed, within=30, what="the admitted Job to complete")
        assert done["spec"]["suspend"] is False
        assert done["spec"]["template"]["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}


@pytest.fixture
async def local() -> AsyncIterator[tuple[LocalCluster, Client]]:
    """``kadmit local``'s setup in-process: kadmit on its ServiceAccount token, the test on admin."""
    app: KadmitApp | None = None

    def port() -> int:
        if app is None:
            raise LookupError("kadmit is not running")
        return app.webhook_port

    config = local_setup.local_configuration(fast_config())
    service = (config.namespace, config.webhook_service_name)
    async with (
        LocalCluster(
            token=True,
            addons=default_addons(node_config(), seed=11),
            service_resolver=local_setup.webhook_resolver(service, port),
        ) as cluster,
        await cluster.api_client() as admin,
    ):
        kube = Client(admin)
        await local_setup.install_crds(kube)
        await local_setup.ensure_namespace(kube, config.namespace)
        await local_setup.ensure_service_account(kube, config.namespace)
        await local_setup.install_rbac(kube, config.namespace)
        token = cluster.service_account_token(config.namespace, local_setup.CONTROLLER_SERVICE_ACCOUNT)
        async with await Client.connect(cluster.kubeconfig_for(token)) as kadmit_client:
            app = KadmitApp(
                kadmit_client, config,
                controller_username=local_setup.controller_username(config.namespace),
            )
            await app.start()
            try:
                await local_setup.install_webhooks(kube, *service)
                async with asyncio.timeout(20):
                    await local_setup.wait_until(app.ready)
                await local_setup.install_samples(kube)
                yield cluster, kube
            finally:
                await app.stop()


async def start_as(cluster: LocalCluster, token: str, name: str) -> ApiException:
    async with await cluster.api_client(token) as api:
        with pytest.raises(ApiException) as caught:
            await client.BatchV1Api(api).patch_namespaced_job(name, "default", START)
    return caught.value


async def test_the_start_guard_checks_the_caller_and_the_admission(
        local: tuple[LocalCluster, Client]) -> None:
    cluster, kube = local
    assert local_setup.controller_username("kadmit-system") == KADMIT_SA
    await kube.create(JOBS, job("too-big", cpu="100", parallelism=1))

    async def inadmissible() -> bool:
        listing = await kube.list(WORKLOADS, "default")
        return any(condition(wl, "QuotaReserved") == "False" for wl in listing["items"])

    await eventually(inadmissible, what="too-big's Workload to be found inadmissible")
    # Another service account is a user like any other: RBAC lets it edit Jobs in default (the
    # built-in edit role), and the webhook's guard still denies it by name.
    await kube.create(ROLE_BINDINGS, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "builder-edits", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": "default"}],
    })
    builder = cluster.service_account_token("default", "builder")
    denied = await start_as(cluster, builder, "too-big")
    assert denied.status == 403
    assert json.loads(denied.body or b"{}")["message"] == user_denial(
        "too-big", "system:serviceaccount:default:builder"
    )
    # kadmit's own identity is not enough either: the Workload must be admitted.
    as_kadmit = cluster.service_account_token("kadmit-system", "kadmit-controller-manager")
    denied = await start_as(cluster, as_kadmit, "too-big")
    assert json.loads(denied.body or b"{}")["message"] == (
        'admission webhook "vjob.kb.io" denied the request: Job default/too-big cannot be '
        "unsuspended: its Workload is not admitted by kadmit"
    )
    # Other user writes to a managed Job are not the guard's business.
    labelled = await kube.patch(JOBS, "default", "too-big", {"metadata": {"labels": {"team": "a"}}})
    assert labelled["metadata"]["labels"]["team"] == "a" and labelled["spec"]["suspend"] is True
