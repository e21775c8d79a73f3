"""Whatever arrives, every path answers 200 (a verdict that echoes the uid) or 400, never 500."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from kadmit.webhook.app import all_webhooks
from tests.webhook.conftest import review
from tests.webhook.memview import MemoryView

JUNK: list[Any] = [None, 0, -1, 2**40, 1.5, True, "", "x", [], [1, "a"], {}, {"a": [None]}]


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths_of(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths_of(child, (*prefix, index))
    return found


def corrupt(document: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    document = copy.deepcopy(document)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths_of(document))
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        if rng.random() < 0.2 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(JUNK))
        if not paths_of(document):
            break
    return document


def seed_job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "x",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/max-exec-time-seconds": "5"},
            "annotations": {"kueue.x-k8s.io/job-min-parallelism": "1"},
        },
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "suspend": True,
            "template": {"spec": {"containers": []}},
        },
    }


def seed_cluster_queue() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "cohortName": "c",
            "namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]},
            "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {
                            "name": "f",
                            "resources": [{"name": "cpu", "nominalQuota": "1", "lendingLimit": "1"}],
                        }
                    ],
                }
            ],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "a", "onFlavors": ["f"]}]},
        },
    }


async def test_corrupted_reviews_never_crash_or_500(serve: Any) -> None:
    server = await serve(all_webhooks(MemoryView(local_queues={("default", "q"): "cq"})))
    rng = random.Random(20261123)
    cases = [
        ("/mutate-batch-v1-job", review(seed_job())),
        ("/validate-batch-v1-job", review(seed_job(), old=seed_job(), operation="UPDATE")),
        (
            "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
            review(seed_cluster_queue(), group="kueue.x-k8s.io", version="v1beta2", kind="ClusterQueue"),
        ),
        (
            "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
            review(seed_cluster_queue(), group="kueue.x-k8s.io", version="v1beta2", kind="ClusterQueue"),
        ),
    ]
    outcomes = {200: 0, 400: 0}
    for _ in range(80):
        path, valid = rng.choice(cases)
        document = corrupt(valid, rng)
        async with await server.post(path, data=json.dumps(document).encode()) as resp:
            assert resp.status in (200, 400), (path, document, await resp.text())
            outcomes[resp.status] += 1
            if resp.status == 400:
                text = await resp.text()
                assert text.count("\n") == 1
                continue
            answer = await resp.json()
        response = answer["response"]
        assert response["uid"] == document["request"]["uid"]
        assert isinstance(response["allowed"], bool)
        if not response["allowed"]:
            assert response["status"]["message"]
            # A denial, but not from a handler tripping over the shape: those are bugs.
            assert response["status"]["code"] != 500, response["status"]["message"]
    assert outcomes[200] > 0 and outcomes[400] > 0
    # and the server still answers a good request
    async with await server.post("/mutate-batch-v1-job", review(seed_job())) as resp:
        assert (await resp.json())["response"]["allowed"] is True


async def test_odd_user_info_is_a_400_not_a_500(serve: Any) -> None:
    server = await serve(all_webhooks(MemoryView()))
    body = review(seed_job())
    body["request"]["userInfo"]["groups"] = 1.5
    async with await server.post("/validate-batch-v1-job", body) as resp:
        assert resp.status == 400
        assert "userInfo needs a string username and a list of string groups" in await resp.text()


async def test_corrupted_conversion_reviews_never_crash(serve: Any) -> None:
    from kadmit.webhook.conversion import handle_conversion_review

    server = await serve([], extra={"/convert": handle_conversion_review})
    rng = random.Random(7)
    valid = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "u-1",
            "desiredAPIVersion": "kueue.x-k8s.io/v1beta1",
            "objects": [seed_cluster_queue()],
        },
    }
    for _ in range(40):
        document = corrupt(valid, rng)
        async with await server.post("/convert", data=json.dumps(document).encode()) as resp:
            assert resp.status in (200, 400), await resp.text()
            if resp.status == 200:
                result = (await resp.json())["response"]["result"]
                assert result["status"] in ("Success", "Failure")
