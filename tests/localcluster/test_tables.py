"""Table output for custom resources: exactly the CRD's printer columns, filters and dates rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.tables import _json_path

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
CRD = Path(__file__).resolve().parents[2] / "manifests" / "crds" / "kueue.x-k8s.io_workloads.yaml"


def test_printer_column_paths_follow_filters_indexes_and_nested_keys() -> None:
    obj = {
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "False", "detail": {"why": "checks"}},
            ]
        },
        "spec": {"podSets": [{"name": "a"}, {"name": "b"}]},
    }
    assert _json_path(obj, ".status.conditions[?(@.type=='Admitted')].status") == "False"
    assert _json_path(obj, '.status.conditions[?(@.type=="QuotaReserved")].status') == "True"
    assert _json_path(obj, ".status.conditions[?(@.detail.why=='checks')].type") == "Admitted"
    assert _json_path(obj, ".status.conditions[?(@.type=='Finished')].status") is None
    assert _json_path(obj, ".spec.podSets[-1].name") == "b"
    assert _json_path(obj, ".spec.podSets[5].name") is None


async def test_workload_table_has_kueues_columns_once_with_conditions_and_age() -> None:
    async with LocalCluster() as cluster, aiohttp.ClientSession() as http:
        async with http.post(
            f"{cluster.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            json=yaml.safe_load(CRD.read_text()),
        ) as resp:
            assert resp.status == 201, await resp.text()
        workload: dict[str, Any] = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "wl", "namespace": "default"},
            "spec": {
                "queueName": "user-queue",
                "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
            },
        }
        base = f"{cluster.url}/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"
        async with http.post(base, json=workload) as resp:
            assert resp.status == 201, await resp.text()
            stored = await resp.json()
        stored["status"] = {
            "conditions": [
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "The workload is admitted",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
        async with http.put(f"{base}/wl/status", json=stored) as resp:
            assert resp.status == 200, await resp.text()
        async with http.get(base, headers={"Accept": TABLE}) as resp:
            table = await resp.json()
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "Queue", "Reserved in", "Admitted", "Finished", "Age"]
    cells = dict(zip(names, table["rows"][0]["cells"], strict=True))
    assert cells["Name"] == "wl" and cells["Queue"] == "user-queue" and cells["Admitted"] == "True"
    assert cells["Finished"] is None
    assert isinstance(cells["Age"], str) and cells["Age"].endswith("s") and "T" not in cells["Age"]


async def test_node_table_shows_status_roles_and_version() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.32.0"},
        },
    }
    async with LocalCluster() as cluster, aiohttp.ClientSession() as http:
        async with http.post(f"{cluster.url}/api/v1/nodes", json=node) as resp:
            assert resp.status == 201, await resp.text()
            stored = await resp.json()
        stored["status"] = node["status"]
        async with http.put(f"{cluster.url}/api/v1/nodes/n1/status", json=stored) as resp:
            assert resp.status == 200, await resp.text()
        async with http.get(f"{cluster.url}/api/v1/nodes", headers={"Accept": TABLE}) as resp:
            table = await resp.json()
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "Status", "Roles", "Age", "Version"]  # kubectl get nodes' order
    cells = table["rows"][0]["cells"]
    assert cells[:3] == ["n1", "Ready,SchedulingDisabled", "worker"] and cells[4] == "v1.32.0"
