"""kubectl 1.32 against the local API server, with its default ``--validate=strict``.

Each test gives kubectl its own ``--cache-dir`` so discovery and OpenAPI are fetched afresh.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
import yaml

from kadmit.localcluster.cluster import LocalCluster
from tests.localcluster.conftest import kueue_examples

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

REPO = Path(__file__).resolve().parents[2]
JOB_YAML = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: pi
  namespace: default
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
        resources:
          requests: {cpu: 100m}
"""
CRD_YAML = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
          status:
            type: object
            properties:
              conditions:
                type: array
                items: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""
WIDGET_YAML = """\
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: default}
spec: {size: 3}
"""


class Kubectl:
    def __init__(self, cluster: LocalCluster, cache: Path) -> None:
        self.base = ["kubectl", "--kubeconfig", cluster.kubeconfig, "--cache-dir", str(cache)]

    async def __call__(self, *args: str, check: bool = True) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            *self.base, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        code = proc.returncode or 0
        if check and code != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({code}): {err.decode()}")
        return code, out.decode(), err.decode()


@pytest.fixture
def kubectl(cluster: LocalCluster, tmp_path: Path) -> Kubectl:
    return Kubectl(cluster, tmp_path / "kube-cache")


async def test_job_create_get_patch_wait_delete(
    kubectl: Kubectl, cluster: LocalCluster, tmp_path: Path
) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB_YAML)
    _, out, _ = await kubectl("create", "-f", str(manifest))
    assert out.strip() == "job.batch/pi created"
    _, out, _ = await kubectl("get", "job", "pi", "-o", "yaml")
    job = yaml.safe_load(out)
    assert job["spec"]["suspend"] is True and job["spec"]["parallelism"] == 1
    assert any(r.query.get("fieldValidation") == "Strict" for r in cluster.requests if r.method == "POST")
    await kubectl("patch", "job", "pi", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    _, out, _ = await kubectl("get", "job", "pi", "-o", "json")
    assert json.loads(out)["spec"]["suspend"] is False

    waiter = asyncio.create_task(kubectl("wait", "--for=condition=Complete", "job/pi", "--timeout=20s"))
    await asyncio.sleep(0.5)
    status = {"status": {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}}
    await kubectl("patch", "job", "pi", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    _, out, _ = await waiter
    assert out.strip() == "job.batch/pi condition met"

    _, out, _ = await kubectl("delete", "job", "pi")
    assert out.strip() == 'job.batch "pi" deleted'
    assert cluster.store.get("batch", "jobs", "default", "pi") is None


async def test_custom_resource_from_crd_file(kubectl: Kubectl, tmp_path: Path) -> None:
    crd, widget = tmp_path / "crd.yaml", tmp_path / "widget.yaml"
    crd.write_text(CRD_YAML)
    widget.write_text(WIDGET_YAML)
    await kubectl("create", "-f", str(crd))
    await kubectl("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=10s")
    _, out, _ = await kubectl("create", "-f", str(widget))
    assert out.strip() == "widget.example.com/w1 created"
    _, out, _ = await kubectl("get", "widgets")
    # A CRD that declares printer columns gets exactly those (no implicit Age), as upstream.
    assert out.split() == ["NAME", "SIZE", "w1", "3"]
    await kubectl("patch", "widget", "w1", "--type=merge", "-p", '{"spec":{"size":4}}')
    _, out, _ = await kubectl("get", "widget", "w1", "-o", "yaml")
    assert yaml.safe_load(out)["spec"] == {"size": 4}

    waiter = asyncio.create_task(kubectl("wait", "--for=condition=Ready", "widget/w1", "--timeout=20s"))
    await asyncio.sleep(0.5)
    status = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    await kubectl("patch", "widget", "w1", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    _, out, _ = await waiter
    assert out.strip() == "widget.example.com/w1 condition met"

    _, out, _ = await kubectl("delete", "widget", "w1")
    assert out.strip() == 'widget.example.com "w1" deleted'


async def test_strict_validation_rejects_unknown_fields(kubectl: Kubectl, tmp_path: Path) -> None:
    crd, widget = tmp_path / "crd.yaml", tmp_path / "widget.yaml"
    crd.write_text(CRD_YAML)
    widget.write_text(WIDGET_YAML.replace("{size: 3}", "{size: 3, colour: red}"))
    await kubectl("create", "-f", str(crd))
    code, _, err = await kubectl("create", "-f", str(widget), check=False)
    assert code == 1 and 'unknown field "spec.colour"' in err
    job = tmp_path / "job.yaml"
    job.write_text(JOB_YAML.replace("  suspend: true", "  suspend: true\n  bogus: 1"))
    code, _, err = await kubectl("create", "-f", str(job), check=False)
    assert code == 1 and 'unknown field "spec.bogus"' in err


async def test_kueue_crds_and_examples_apply_unchanged(kubectl: Kubectl) -> None:
    for path in sorted((REPO / "manifests" / "crds").glob("kueue.x-k8s.io_*.yaml")):
        await kubectl("apply", "-f", str(path))
    await kubectl("apply", "-f", str(kueue_examples() / "admin__single-clusterqueue-setup.yaml"))
    _, out, _ = await kubectl(
        "get", "clusterqueue", "cluster-queue", "-o", "jsonpath={.spec.resourceGroups[0].flavors[0].name}"
    )
    assert out == "default-flavor"
    # A second apply is a three-way merge patch against the last-applied annotation.
    _, out, _ = await kubectl("apply", "-f", str(kueue_examples() / "admin__single-clusterqueue-setup.yaml"))
    assert "unchanged" in out


async def test_kustomize_deployment_manifests_apply(kubectl: Kubectl, cluster: LocalCluster) -> None:
    await kubectl("apply", "-k", str(REPO / "manifests" / "crds"))
    _, out, _ = await kubectl("apply", "-k", str(REPO / "manifests" / "base"))
    assert "deployment.apps/kadmit-controller-manager created" in out
    assert "poddisruptionbudget.policy/kadmit-controller-manager created" in out
    _, out, err = await kubectl("apply", "-k", str(REPO / "manifests" / "base"))
    assert "service/kadmit-webhook-service unchanged" in out and "warning" not in err.lower()
    hooks = cluster.store.get(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        None,
        "kadmit-validating-webhook-configuration",
    )
    assert hooks is not None and hooks["webhooks"][0]["name"] == "vjob.kb.io"


async def test_apply_updates_an_existing_custom_resource_with_a_merge_patch(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    crd, widget = tmp_path / "crd.yaml", tmp_path / "widget.yaml"
    crd.write_text(CRD_YAML)
    widget.write_text(WIDGET_YAML)
    await kubectl("create", "-f", str(crd))
    await kubectl("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=10s")
    await kubectl("create", "-f", str(widget))  # no last-applied annotation, as `kadmit local` samples
    widget.write_text(WIDGET_YAML.replace("size: 3", "size: 5"))
    _, out, _ = await kubectl("apply", "-f", str(widget))
    assert out.strip() == "widget.example.com/w1 configured"
    _, out, _ = await kubectl("get", "widget", "w1", "-o", "yaml")
    assert yaml.safe_load(out)["spec"] == {"size": 5}
