"""Server-side apply through kubectl: managedFields, field managers, conflicts, --force-conflicts,
custom resources and their status subresource."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.ssa import apply, path_string

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

CONFIG_MAP = """apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default, labels: {team: a}}
data: {x: "1", w: "2"}
"""
CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}, color: {type: string}}}
          status: {type: object, properties: {ready: {type: boolean}}}
"""


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(https=True, token=True) as running:
        yield running


async def kubectl(cluster: LocalCluster, *args: str, stdin: str = "") -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", cluster.kubeconfig, *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def get(cluster: LocalCluster, *args: str) -> Any:
    code, out, err = await kubectl(cluster, "get", *args, "-o", "json", "--show-managed-fields")
    assert code == 0, err
    return json.loads(out)


async def test_apply_creates_reapplies_and_records_its_fields(cluster: LocalCluster) -> None:
    code, out, err = await kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=CONFIG_MAP)
    assert (code, out.strip()) == (0, "configmap/settings serverside-applied"), err
    code, out, err = await kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=CONFIG_MAP)
    assert code == 0, err
    obj = await get(cluster, "configmap", "settings")
    [entry] = obj["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("kubectl", "Apply", "v1")
    assert entry["fieldsV1"] == {"f:data": {"f:w": {}, "f:x": {}}, "f:metadata": {"f:labels": {"f:team": {}}}}
    # a field the manager stops applying is removed
    code, _, err = await kubectl(
        cluster, "apply", "--server-side", "-f", "-", stdin=CONFIG_MAP.replace(', w: "2"', "")
    )
    assert code == 0, err
    assert (await get(cluster, "configmap", "settings"))["data"] == {"x": "1"}


async def test_conflicts_with_another_manager_and_force(cluster: LocalCluster) -> None:
    assert (await kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=CONFIG_MAP))[0] == 0
    code, _, err = await kubectl(
        cluster,
        "patch",
        "configmap",
        "settings",
        "-p",
        '{"data":{"x":"9"}}',
        "--field-manager",
        "kubectl-edit",
    )
    assert code == 0, err
    obj = await get(cluster, "configmap", "settings")
    editor = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == "kubectl-edit")
    assert editor["operation"] == "Update" and editor["fieldsV1"] == {"f:data": {"f:x": {}}}
    code, _, err = await kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=CONFIG_MAP)
    assert code == 1
    assert (
        'error: Apply failed with 1 conflict: conflict with "kubectl-edit" using v1 at '
        f"{editor['time']}: .data.x" in err
    )
    # the same value is shared, not a conflict
    code, _, err = await kubectl(
        cluster, "apply", "--server-side", "-f", "-", stdin=CONFIG_MAP.replace('x: "1"', 'x: "9"')
    )
    assert code == 0, err
    code, _, err = await kubectl(
        cluster, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=CONFIG_MAP
    )
    assert code == 0, err
    obj = await get(cluster, "configmap", "settings")
    assert obj["data"]["x"] == "1"
    assert [e["manager"] for e in obj["metadata"]["managedFields"]] == [
        "kubectl"
    ]  # kubectl-edit lost .data.x


async def test_apply_on_a_custom_resource_and_its_status(cluster: LocalCluster) -> None:
    assert (await kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=CRD))[0] == 0
    code, _, err = await kubectl(cluster, "wait", "--for=condition=Established", "crd/widgets.example.com")
    assert code == 0, err
    widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\n"
    code, _, err = await kubectl(
        cluster, "apply", "--server-side", "-f", "-", stdin=widget + "spec: {size: 3, color: red}\n"
    )
    assert code == 0, err
    status = widget + "status: {ready: true}\n"
    code, _, err = await kubectl(
        cluster, "apply", "--server-side", "--subresource=status", "--field-manager=status-writer", "-f", "-",
        stdin=status,
    )  # fmt: skip
    assert code == 0, err
    obj = await get(cluster, "widget", "w")
    assert obj["status"] == {"ready": True} and obj["spec"] == {"size": 3, "color": "red"}
    by_manager = {e["manager"]: e for e in obj["metadata"]["managedFields"]}
    assert by_manager["status-writer"]["subresource"] == "status"
    assert by_manager["status-writer"]["fieldsV1"] == {"f:status": {"f:ready": {}}}
    # a second manager changing the size conflicts with kubectl's applied spec
    code, _, err = await kubectl(
        cluster,
        "apply",
        "--server-side",
        "--field-manager=other",
        "-f",
        "-",
        stdin=widget + "spec: {size: 4}\n",
    )
    assert code == 1 and 'Apply failed with 1 conflict: conflict with "kubectl": .spec.size' in err


def test_keyed_lists_merge_by_name_and_conflicts_name_the_item() -> None:
    live = None
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "one"}]},
    }
    first = apply(live, pod, "alice", False, "v1", builtin=True)
    sidecar = {**pod, "spec": {"containers": [{"name": "b", "image": "two"}]}}
    both = apply(first, sidecar, "bob", False, "v1", builtin=True)
    assert [c["name"] for c in both["spec"]["containers"]] == ["a", "b"]
    clash = {**pod, "spec": {"containers": [{"name": "a", "image": "three"}]}}
    with pytest.raises(Exception, match=r'conflict with "alice": \.spec\.containers\[name="a"\]\.image'):
        apply(both, clash, "bob", False, "v1", builtin=True)
    assert (
        path_string(("f:spec", "f:containers", 'k:{"name":"a"}', "f:image"))
        == '.spec.containers[name="a"].image'
    )
    assert yaml.safe_dump(both)  # plain data all the way down
