"""RayJob, RayCluster and AppWrapper handed to MultiKueue by the webhooks over HTTPS, as Kueue's
``ApplyDefaultForManagedBy`` does: a queue whose ClusterQueue has a MultiKueue check gets
``spec.managedBy: kueue.x-k8s.io/multikueue`` when the object names no manager or its own
operator; and Kueue's refusal of in-tree autoscaling for a MultiKueue elastic RayCluster."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from kadmit.webhook.app import all_webhooks
from kadmit.webhook.jobs import JobWebhookConfig
from tests.webhook.conftest import review
from tests.webhook.memview import MemoryView

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"
QUEUE = "kueue.x-k8s.io/queue-name"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
CONFIG = JobWebhookConfig(
    integration_kinds=frozenset(
        {
            ("batch", "Job"),
            ("ray.io", "RayJob"),
            ("ray.io", "RayCluster"),
            ("workload.codeflare.dev", "AppWrapper"),
        }
    ),
    multikueue=True,
)
# sample file, group, version, kind, webhook path stem, the kind's own operator (managedBy)
KINDS = [
    ("rayjob.yaml", "ray.io", "v1", "RayJob", "ray-io-v1-rayjob", "ray.io/kuberay-operator"),
    ("raycluster.yaml", "ray.io", "v1", "RayCluster", "ray-io-v1-raycluster", "ray.io/kuberay-operator"),
    (
        "appwrapper.yaml",
        "workload.codeflare.dev",
        "v1beta2",
        "AppWrapper",
        "workload-codeflare-dev-v1beta2-appwrapper",
        "workload.codeflare.dev/appwrapper-controller",
    ),
]
VIEW = MemoryView(
    local_queues={("default", "mk"): "mk-cq", ("default", "plain"): "cq"},
    cluster_queue_checks={"mk-cq": [MULTIKUEUE], "cq": ["example.com/provisioning"]},
)


def sample(filename: str, queue: str, managed_by: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((SAMPLES / filename).read_text())
    obj["metadata"]["uid"] = "uid-1"
    obj["metadata"]["labels"] = {QUEUE: queue}
    if managed_by is not None:
        obj["spec"]["managedBy"] = managed_by
    return obj


async def post(server: Any, path: str, obj: dict[str, Any], group: str, version: str, kind: str) -> Any:
    body = review(obj, namespace="default", group=group, version=version, kind=kind)
    async with await server.post(path, body) as resp:
        assert resp.status == 200
        return (await resp.json())["response"]


async def mutate(server: Any, stem: str, obj: dict[str, Any], group: str, version: str, kind: str) -> Any:
    response = await post(server, f"/mutate-{stem}", obj, group, version, kind)
    assert response["allowed"] is True, response
    if "patch" not in response:
        return obj
    return jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))


@pytest.mark.parametrize("filename, group, version, kind, stem, own", KINDS, ids=[k[3] for k in KINDS])
async def test_a_multikueue_queue_hands_the_object_to_multikueue(
    serve: Any, filename: str, group: str, version: str, kind: str, stem: str, own: str
) -> None:
    server = await serve(all_webhooks(VIEW, CONFIG))

    async def managed_by(obj: dict[str, Any]) -> Any:
        mutated = await mutate(server, stem, obj, group, version, kind)
        assert mutated["spec"]["suspend"] is True  # still held until admitted on the manager
        return mutated["spec"].get("managedBy")

    assert await managed_by(sample(filename, "mk")) == MULTIKUEUE
    assert await managed_by(sample(filename, "mk", own)) == MULTIKUEUE  # the kind's operator: replaced
    assert await managed_by(sample(filename, "mk", "example.com/mine")) == "example.com/mine"
    assert await managed_by(sample(filename, "plain")) is None  # no MultiKueue check on its queue
    # With MultiKueue off (Kueue's feature gate), nothing is defaulted.
    off = await serve(
        all_webhooks(VIEW, JobWebhookConfig(integration_kinds=CONFIG.integration_kinds, multikueue=False))
    )
    assert "managedBy" not in (await mutate(off, stem, sample(filename, "mk"), group, version, kind))["spec"]


async def test_a_multikueue_elastic_raycluster_may_not_autoscale(serve: Any) -> None:
    server = await serve(all_webhooks(VIEW, CONFIG))
    gvk = ("ray.io", "v1", "RayCluster")

    def elastic(queue: str) -> dict[str, Any]:
        cluster = sample("raycluster.yaml", queue)
        cluster["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
        cluster["spec"]["enableInTreeAutoscaling"] = True
        # The gates Kueue's mutating webhook adds to an elastic RayCluster (kadmit's does not yet).
        for template in [
            cluster["spec"]["headGroupSpec"]["template"],
            *(g["template"] for g in cluster["spec"]["workerGroupSpecs"]),
        ]:
            template["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/elastic-job"}]
        return cluster

    dispatched = await mutate(server, "ray-io-v1-raycluster", elastic("mk"), *gvk)
    assert dispatched["spec"]["managedBy"] == MULTIKUEUE
    denied = await post(server, "/validate-ray-io-v1-raycluster", dispatched, *gvk)
    assert denied["allowed"] is False
    assert denied["status"]["message"] == (
        "spec.enableInTreeAutoscaling: Forbidden: "
        "in-tree autoscaling is not supported for a MultiKueue-managed elastic RayCluster"
    )
    # The same elastic cluster on a queue without MultiKueue autoscales as before.
    local = await mutate(server, "ray-io-v1-raycluster", elastic("plain"), *gvk)
    assert (await post(server, "/validate-ray-io-v1-raycluster", local, *gvk))["allowed"] is True
    # A MultiKueue RayCluster that does not autoscale is accepted.
    fixed = copy.deepcopy(dispatched)
    fixed["spec"]["enableInTreeAutoscaling"] = False
    assert (await post(server, "/validate-ray-io-v1-raycluster", fixed, *gvk))["allowed"] is True
