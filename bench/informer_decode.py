"""How much a Workload list costs to decode: kubernetes-asyncio's typed models vs plain JSON dicts.

The informers work on dicts (``kadmit.kube``); this prints why. Run:

    python bench/informer_decode.py [COUNT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

# `python bench/X.py` puts bench/ first on sys.path, where bench/webhook.py would shadow the webhook
# package (bench/engine.py the engine one): drop bench/ and import kadmit from the repository root.
# ruff: noqa: E402 (so kadmit's imports come after this)
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

from kubernetes_asyncio.client import ApiClient


def job(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"job-{i}",
            "namespace": "default",
            "uid": f"uid-{i}",
            "resourceVersion": str(i),
            "labels": {"kueue.x-k8s.io/queue-name": "default", "app": "bench"},
            "annotations": {"note": "x" * 40},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "parallelism": 3,
            "completions": 3,
            "suspend": True,
            "backoffLimit": 6,
            "template": {
                "metadata": {"labels": {"app": "bench"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["sleep", "10"],
                            "resources": {"requests": {"cpu": "1", "memory": "200Mi"}},
                        }
                    ],
                },
            },
        },
        "status": {
            "active": 0,
            "conditions": [
                {
                    "type": "Suspended",
                    "status": "True",
                    "reason": "JobSuspended",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    }


class _Response:
    def __init__(self, data: str) -> None:
        self.data = data


async def main(count: int) -> None:
    body = json.dumps(
        {
            "kind": "JobList",
            "apiVersion": "batch/v1",
            "metadata": {"resourceVersion": "1"},
            "items": [job(i) for i in range(count)],
        }
    )
    async with ApiClient() as client:
        start = time.perf_counter()
        items = json.loads(body)["items"]
        as_dicts = time.perf_counter() - start
        start = time.perf_counter()
        typed = client.deserialize(_Response(body), "V1JobList")
        as_models = time.perf_counter() - start
    assert len(items) == len(typed.items) == count
    print(
        f"{count} Jobs: dicts {as_dicts * 1000:.1f} ms, typed models {as_models * 1000:.1f} ms, "
        f"ratio {as_models / as_dicts:.1f}x"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("count", type=int, nargs="?", default=2000, help="Jobs in the list (default 2000)")
    count = parser.parse_args().count
    if count < 1:
        parser.error("COUNT must be at least 1")
    asyncio.run(main(count))
