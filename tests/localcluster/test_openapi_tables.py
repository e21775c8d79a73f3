"""OpenAPI v3 documents, Table output, watch-list initial events, access reviews, kubeconfig."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.kubeconfig import kubeconfig_dict, write_kubeconfig

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def get_json(url: str, accept: str = "application/json") -> tuple[int, Any, str]:
    async with aiohttp.ClientSession() as http, http.get(url, headers={"Accept": accept}) as resp:
        return resp.status, await resp.json(), resp.headers.get("Content-Type", "")


async def test_openapi_root_and_group_documents(cluster: LocalCluster) -> None:
    code, root, _ = await get_json(f"{cluster.url}/openapi/v3")
    assert code == 200
    paths = root["paths"]
    assert isinstance(paths, dict) and "apis/batch/v1" in paths and "api/v1" in paths
    code, doc, _ = await get_json(cluster.url + paths["apis/batch/v1"]["serverRelativeURL"])
    assert code == 200
    item = doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]
    assert item["patch"]["x-kubernetes-group-version-kind"] == {
        "group": "batch",
        "version": "v1",
        "kind": "Job",
    }
    assert "fieldValidation" in [p["name"] for p in item["parameters"]]
    job = doc["components"]["schemas"]["V1Job"]
    assert job["x-kubernetes-group-version-kind"] == [{"group": "batch", "version": "v1", "kind": "Job"}]
    containers = doc["components"]["schemas"]["V1PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    code, _, _ = await get_json(f"{cluster.url}/openapi/v3/apis/nothing/v1")
    assert code == 404


async def test_tables_for_kubectl_get(cluster: LocalCluster) -> None:
    code, table, _ = await get_json(f"{cluster.url}/api/v1/namespaces", TABLE)
    assert code == 200 and table["kind"] == "Table"
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns == ["Name", "Status", "Age"]
    rows = table["rows"]
    assert isinstance(rows, list) and rows[0]["cells"][:2] == ["default", "Active"]
    assert rows[0]["object"]["kind"] == "PartialObjectMetadata"


async def test_send_initial_events_ends_with_a_bookmark(cluster: LocalCluster) -> None:
    url = (
        f"{cluster.url}/api/v1/namespaces?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
        "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"
    )
    events = []
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        async for line in resp.content:
            events.append(json.loads(line))
    added = [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"]
    assert added == ["default", "kube-node-lease", "kube-public", "kube-system"]
    first_bookmark = next(e for e in events if e["type"] == "BOOKMARK")
    assert first_bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert events.index(first_bookmark) == len(added)


async def test_self_subject_access_review_allows(cluster: LocalCluster) -> None:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "create", "resource": "jobs", "group": "batch"}},
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{cluster.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review
        ) as resp:
            assert resp.status == 201 and (await resp.json())["status"]["allowed"] is True
        async with http.post(
            f"{cluster.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json={}
        ) as resp:
            assert resp.status == 400


def test_kubeconfig_writer(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "deep" / "config",
        kubeconfig_dict("https://127.0.0.1:1", token="t", ca_data=b"PEM", namespace="ns"),
    )
    config = yaml.safe_load(path.read_text())
    assert config["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:1",
        "certificate-authority-data": "UEVN",
    }
    assert config["users"][0]["user"] == {"token": "t"}
    assert config["contexts"][0]["context"]["namespace"] == "ns"
    assert path.stat().st_mode & 0o777 == 0o600
    assert list(path.parent.iterdir()) == [path]


async def test_pod_table_columns(cluster: LocalCluster) -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{cluster.url}/api/v1/namespaces/default/pods", json=pod) as resp:
            assert resp.status == 201
        status = {
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": "c",
                        "ready": True,
                        "restartCount": 2,
                        "image": "busybox",
                        "imageID": "",
                        "state": {},
                    }
                ],
            }
        }
        async with http.patch(
            f"{cluster.url}/api/v1/namespaces/default/pods/p/status",
            json=status,
            headers={"Content-Type": "application/merge-patch+json"},
        ) as resp:
            assert resp.status == 200, await resp.text()
    code, table, _ = await get_json(f"{cluster.url}/api/v1/namespaces/default/pods", TABLE)
    assert code == 200
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "IP",
        "Node",
        "Age",
    ]
    assert table["rows"][0]["cells"][:4] == ["p", "1/1", "Running", 2]
