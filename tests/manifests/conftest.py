"""Fixtures for the tests of manifests/: the repository's YAML, loaded once per session."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.manifests.kube_schema import ObjectValidator

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
KUEUE_EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "kueue-examples"


#: libyaml's parser when PyYAML has it: the CRDs and kustomize's output are thousands of lines.
YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_documents(text: str) -> list[dict[str, Any]]:
    """The non-empty YAML documents of ``text``."""
    return [doc for doc in yaml.load_all(text, Loader=YAML_LOADER) if doc]


@functools.cache
def _documents(path: Path) -> tuple[dict[str, Any], ...]:
    return tuple(parse_documents(path.read_text()))


def load_documents(path: Path) -> list[dict[str, Any]]:
    """The non-empty YAML documents of a file (parsed once; each caller gets its own copy)."""
    return copy.deepcopy(list(_documents(path)))


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


class Validators(dict[tuple[str, str], ObjectValidator]):
    """A validator per (apiVersion, kind) served by the CRDs, built when first asked for."""

    def __init__(self, crds: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        self.schemas: dict[tuple[str, str], dict[str, Any]] = {}
        for crd in crds.values():
            spec = crd["spec"]
            for version in spec["versions"]:
                key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                self.schemas[key] = version["schema"]["openAPIV3Schema"]

    def __contains__(self, key: object) -> bool:
        return key in self.schemas

    def __missing__(self, key: tuple[str, str]) -> ObjectValidator:
        validator = self[key] = ObjectValidator(self.schemas[key])
        return validator


@pytest.fixture(scope="session")
def validators(crds: dict[str, dict[str, Any]]) -> Validators:
    return Validators(crds)
