"""The server answers every path kadmit's manifests send requests to, and no other."""

from __future__ import annotations

from pathlib import Path

import yaml

from kadmit.webhook.app import CONVERT_PATH, all_webhooks
from tests.webhook.memview import MemoryView

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def manifest_paths() -> set[str]:
    paths: set[str] = set()
    for document in yaml.safe_load_all((MANIFESTS / "base" / "webhooks.yaml").read_text()):
        for hook in (document or {}).get("webhooks") or []:
            paths.add(hook["clientConfig"]["service"]["path"])
    for crd in (MANIFESTS / "crds").glob("*.yaml"):
        conversion = (yaml.safe_load(crd.read_text()).get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            paths.add(conversion["webhook"]["clientConfig"]["service"]["path"])
    return paths


def test_served_paths_are_the_manifests_paths() -> None:
    served = {hook.path for hook in all_webhooks(MemoryView())} | {CONVERT_PATH}
    assert served == manifest_paths()
    assert "/mutate-batch-v1-job" in served
    assert "/validate-kueue-x-k8s-io-v1beta2-workloadpriorityclass" in served
