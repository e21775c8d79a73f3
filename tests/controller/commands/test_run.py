"""``kadmit run``: a file it cannot use is one line and exit code 1, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kadmit.controller.cli import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "/nonexistent.yaml"], "config /nonexistent.yaml: cannot read: No such file"),
        (["--kubeconfig", "/nonexistent"], "--kubeconfig /nonexistent: no such file"),
        (["--config", "BAD"], "unknown field 'managejobs'"),
    ],
)
def test_unusable_files_exit_1(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmanagejobs: true\n")
    args = [str(bad) if a == "BAD" else a for a in args]
    assert main(["run", *args]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kadmit: error: ") and message in lines[0], lines
