"""The committed CRDs and webhook configurations are exactly what manifests/generate.py writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.manifests.conftest import MANIFESTS


def run_generator(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "generate.py"), *args], capture_output=True, text=True, timeout=60
    )


def test_committed_files_match_the_generator() -> None:
    result = run_generator(MANIFESTS, "--check")
    assert result.returncode == 0, result.stderr


def test_check_reports_an_edited_file_and_a_stray_one(tmp_path: Path) -> None:
    copy = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    edited = copy / "crds" / "kueue.x-k8s.io_workloads.yaml"
    edited.write_text(edited.read_text().replace("BestEffortFIFO", "StrictFIFO") + "# edited\n")
    (copy / "crds" / "kueue.x-k8s.io_leftovers.yaml").write_text("kind: Leftover\n")

    result = run_generator(copy, "--check")
    assert result.returncode == 1
    assert "crds/kueue.x-k8s.io_workloads.yaml is not what the generator writes" in result.stderr
    assert "crds/kueue.x-k8s.io_leftovers.yaml is not what the generator writes" in result.stderr
