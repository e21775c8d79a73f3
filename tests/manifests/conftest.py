"""Fixtures for the tests of manifests/: the repository's YAML, loaded once per session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.manifests.kube_schema import ObjectValidator

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
KUEUE_EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "kueue-examples"


def load_documents(path: Path) -> list[dict[str, Any]]:
    """The non-empty YAML documents of a file."""
    with path.open() as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


@pytest.fixture(scope="session")
def manifests_dir() -> Path:
    return MANIFESTS


@pytest.fixture(scope="session")
def crds() -> dict[str, dict[str, Any]]:
    """Every CRD kadmit ships (Kueue's and the third-party ones), by metadata.name."""
    found: dict[str, dict[str, Any]] = {}
    for folder in ("crds", "third-party"):
        for path in sorted((MANIFESTS / folder).glob("*.yaml")):
            for doc in load_documents(path):
                if doc.get("kind") == "CustomResourceDefinition":
                    found[doc["metadata"]["name"]] = doc
    return found


@pytest.fixture(scope="session")
def validators(crds: dict[str, dict[str, Any]]) -> dict[tuple[str, str], ObjectValidator]:
    """A validator per (apiVersion, kind) served by the CRDs."""
    out: dict[tuple[str, str], ObjectValidator] = {}
    for crd in crds.values():
        spec = crd["spec"]
        for version in spec["versions"]:
            key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
            out[key] = ObjectValidator(version["schema"]["openAPIV3Schema"])
    return out
