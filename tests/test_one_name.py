"""In a checkout the repository root is on ``sys.path``: each folder must refuse its bare name.

A second name would load a subpackage twice, with its own globals (two metric registries, two
plugin registries), so ``import engine`` from the root fails with a message that names the one
import that works.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("engine", "kube", "webhook", "checks", "certs", "controller", "localcluster")


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_folder_refuses_its_bare_name(folder: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {folder}"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == f"ImportError: import kadmit.{folder}, not {folder}"


def test_the_namespaced_name_imports() -> None:
    names = ", ".join(f"kadmit.{folder}" for folder in FOLDERS)
    done = subprocess.run(
        [sys.executable, "-c", f"import {names}"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
