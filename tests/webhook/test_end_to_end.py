"""The real path: the embedded API server calls kadmit's webhooks over verified HTTPS.

kadmit's own manifests (webhook configurations, CRDs with conversion) are installed unchanged,
the certificate manager issues and injects the CA, and clients talk only to the API server
through kubernetes-asyncio, as users and controllers do.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kadmit.certs.manager import CertificateManager
from kadmit.kube import Client
from kadmit.localcluster.cluster import LocalCluster
from kadmit.webhook.app import create_webhook_app
from kadmit.webhook.server import WebhookServer
from kadmit.webhook.tls import ServingTLS
from tests.webhook.memview import MemoryView

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = Path("/work/shared/kueue-examples")
NAMESPACE, SERVICE = "kadmit-system", "kadmit-webhook-service"


class Stack:
    def __init__(self, api: Any, view: MemoryView, manager: CertificateManager) -> None:
        self.api = api
        self.view = view
        self.manager = manager
        self.custom = client.CustomObjectsApi(api)
        self.batch = client.BatchV1Api(api)


# One cluster and one server for the module: setting them up (CRDs, certificates) is the slow part.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack() -> AsyncIterator[Stack]:
    tls = ServingTLS()
    view = MemoryView(local_queues={("default", "user-queue"): "cluster-queue"})
    manager_holder: list[CertificateManager] = []
    app = create_webhook_app(view, readiness=lambda: bool(manager_holder and manager_holder[0].ready))
    server = WebhookServer(app, tls.context, host="127.0.0.1", port=0)
    await server.start()
    resolver = {(NAMESPACE, SERVICE): ("127.0.0.1", server.port)}
    try:
        async with LocalCluster(service_resolver=resolver, bookmark_interval=0.2) as cluster:
            api = await cluster.api_client()
            async with api:
                core = client.CoreV1Api(api)
                for name in ("kadmit-system", "default"):
                    try:
                        await core.create_namespace(
                            client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
                        )
                    except ApiException as exc:
                        assert exc.status == 409
                extensions = client.ApiextensionsV1Api(api)
                for path in sorted((ROOT / "manifests" / "crds").glob("kueue.x-k8s.io_*.yaml")):
                    await extensions.create_custom_resource_definition(yaml.safe_load(path.read_text()))
                admission = client.AdmissionregistrationV1Api(api)
                for document in yaml.safe_load_all(
                    (ROOT / "manifests" / "base" / "webhooks.yaml").read_text()
                ):
                    if document and document["kind"] == "MutatingWebhookConfiguration":
                        await admission.create_mutating_webhook_configuration(document)
                    elif document:
                        await admission.create_validating_webhook_configuration(document)
                manager = CertificateManager(Client(api), tls.load, SERVICE, NAMESPACE, retry_delay=0.2)
                manager_holder.append(manager)
                task = asyncio.create_task(manager.run())
                try:
                    for _ in range(500):
                        if manager.ready:
                            break
                        await asyncio.sleep(0.02)
                    assert manager.ready
                    yield Stack(api, view, manager)
                finally:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
    finally:
        await server.stop()


def kueue_samples(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


PLURALS = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}


async def create(stack: Stack, obj: dict[str, Any]) -> dict[str, Any]:
    group, version = obj["apiVersion"].split("/")
    plural = PLURALS[obj["kind"]]
    namespace = obj["metadata"].get("namespace")
    if namespace:
        result: dict[str, Any] = await stack.custom.create_namespaced_custom_object(
            group, version, namespace, plural, obj
        )
    else:
        result = await stack.custom.create_cluster_custom_object(group, version, plural, obj)
    return result


async def test_kueue_setup_and_sample_job_through_the_api_server(stack: Stack) -> None:
    for obj in kueue_samples("admin__single-clusterqueue-setup.yaml"):
        stored = await create(stack, obj)
        if obj["kind"] in ("ClusterQueue", "ResourceFlavor"):
            assert stored["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]

    (job,) = kueue_samples("jobs__sample-job.yaml")
    created = await stack.batch.create_namespaced_job("default", cast(Any, job))
    assert created.spec.suspend is True
    assert created.metadata.labels["kueue.x-k8s.io/queue-name"] == "user-queue"

    # The user (system:admin here) may not start it: only kadmit's controller, once admitted.
    with pytest.raises(ApiException) as denied:
        await stack.batch.patch_namespaced_job(created.metadata.name, "default", {"spec": {"suspend": False}})
    assert denied.value.status == 403
    assert json.loads(denied.value.body or b"{}")["message"] == (
        'admission webhook "vjob.kb.io" denied the request: '
        f"Job default/{created.metadata.name} cannot be unsuspended by system:admin: "
        "kadmit starts it once its Workload is admitted"
    )


async def test_invalid_cluster_queue_is_denied_with_kueues_message(stack: Stack) -> None:
    cq = copy.deepcopy(kueue_samples("admin__single-clusterqueue-setup.yaml")[1])
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "1"
    with pytest.raises(ApiException) as denied:
        await create(stack, cq)
    assert json.loads(denied.value.body or b"{}")["message"] == (
        'admission webhook "vclusterqueue.kb.io" denied the request: '
        'spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: Invalid value: "1": '
        "must be nil when cohort is empty"
    )


async def test_v1beta1_cluster_queue_is_converted_both_ways(stack: Stack) -> None:
    v1beta1 = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "legacy"},  # a name no other test uses: the cluster is shared
        "spec": {
            "cohort": "team",
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": "1"}]}
                    ],
                }
            ],
        },
    }
    await create(stack, v1beta1)
    stored = await stack.custom.get_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "legacy"
    )
    assert stored["spec"]["cohortName"] == "team" and "cohort" not in stored["spec"]
    back = await stack.custom.get_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta1", "clusterqueues", "legacy"
    )
    assert back["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert back["spec"]["cohort"] == "team" and "cohortName" not in back["spec"]
