"""Plugins are built from the Configuration kadmit runs with (``from_configuration``), with their
metrics in the registry they are given."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kadmit.checks.discovery import PluginError, load, load_all
from kadmit.checks.multikueue import ALL_AT_ONCE, INCREMENTAL, MultiKueueCheck
from kadmit.checks.plugin import AdmissionCheckPlugin, CheckContext
from kadmit.checks.verdict import Ready, Verdict
from kadmit.controller.cli import main


class Sized(AdmissionCheckPlugin[None]):
    """A plugin with a setting of its own, under a kadmit extension key."""

    controller_name = "example.com/sized"

    def __init__(self, limit: int = 1) -> None:
        self.limit = limit

    @classmethod
    def from_configuration(
        cls, configuration: Mapping[str, Any], registry: CollectorRegistry | None = None
    ) -> Sized:
        limit = (configuration.get("sized") or {}).get("limit", 1)
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"sized.limit: must be a positive integer, got {limit!r}")
        return cls(limit)

    async def evaluate(self, workload: dict[str, Any], context: CheckContext[None]) -> Verdict:
        return Ready()


SPEC = f"{__name__}:Sized"


def test_a_plugin_class_gets_the_configuration() -> None:
    plugin = load(SPEC, {"sized": {"limit": 4}})
    assert isinstance(plugin, Sized) and plugin.limit == 4
    default = load(SPEC)
    assert isinstance(default, Sized) and default.limit == 1


def test_a_setting_the_plugin_refuses_is_a_one_line_plugin_error() -> None:
    with pytest.raises(PluginError) as exc:
        load(SPEC, {"sized": {"limit": 0}})
    assert str(exc.value) == f"{SPEC}: configuration: sized.limit: must be a positive integer, got 0"


def test_multikueue_reads_kueues_settings_and_registers_its_metrics_where_told() -> None:
    registry = CollectorRegistry()
    configuration = {"namespace": "kueue-system",
                     "multiKueue": {"dispatcherName": INCREMENTAL, "workerLostTimeout": "5m"}}
    [plugin] = load_all(["multikueue"], configuration, registry)
    assert isinstance(plugin, MultiKueueCheck)
    assert plugin.settings.namespace == "kueue-system" and plugin.settings.dispatcher == INCREMENTAL
    assert plugin.settings.worker_lost_timeout == 300.0
    assert b"multikueue_workloads_dispatched_total" in generate_latest(registry)
    [default] = load_all(["multikueue"])
    assert isinstance(default, MultiKueueCheck) and default.settings.dispatcher == ALL_AT_ONCE


def test_checks_run_refuses_a_bad_multikueue_setting_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                    "multiKueue: {workerLostTimeout: later}\n")
    assert main(["checks", "run", "-e", "multikueue", "--config", str(path)]) == 1
    err = capsys.readouterr().err
    expected = f"kadmit: error: config {path}: multiKueue.workerLostTimeout: invalid duration 'later'"
    assert err.splitlines() == [expected]
