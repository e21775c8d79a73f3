"""manifests/prometheus/: a ServiceMonitor that finds kadmit's metrics Service, and a Grafana
dashboard (well-formed, loaded by Grafana's sidecar) whose panels query metrics kadmit exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kadmit.controller.metrics import FAMILIES, WITHOUT_SERIES
from tests.manifests.conftest import MANIFESTS
from tests.manifests.test_kustomize import KUBECTL, build, one

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
DASHBOARD = MANIFESTS / "prometheus" / "kadmit-dashboard.json"
HISTOGRAM_SERIES = ("_bucket", "_count", "_sum")
GRAFANA_SCHEMA = Path(__file__).parent / "grafana" / "dashboard.jsonschema.json"  # see grafana/NOTICE


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels") or [])
    return found


def test_the_service_monitor_selects_the_metrics_service_and_its_port() -> None:
    monitoring = build("prometheus")
    monitor = one(monitoring, "ServiceMonitor", "kadmit-controller-manager-metrics-monitor")
    service = one(build("."), "Service", "kadmit-controller-manager-metrics-service")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    ports = {p["name"] for p in service["spec"]["ports"]}
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    assert endpoint["scheme"] == "https", "kadmit serves its metrics on HTTPS only, with a token"
    assert endpoint["bearerTokenFile"].endswith("/serviceaccount/token")


def test_the_dashboard_is_a_configmap_grafanas_sidecar_loads() -> None:
    config_map = one(build("prometheus"), "ConfigMap", "kadmit-grafana-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["kadmit-dashboard.json"]) == json.loads(DASHBOARD.read_text())


def test_the_dashboard_is_well_formed_grafana_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    occupied: set[tuple[int, int]] = set()
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & occupied, f"{panel['title']} overlaps another panel"
        occupied |= cells
        if panel["type"] == "row":
            continue
        assert panel["type"] in {"timeseries", "table", "stat", "bargauge"}, panel["type"]
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["refId"] and target["expr"].count("(") == target["expr"].count(")"), target


def test_the_dashboard_is_valid_under_grafanas_published_dashboard_schema() -> None:
    """Grafana's own JSON schema of a dashboard (the Foundation SDK's, generated from Grafana's
    schema; ``additionalProperties: false`` at every level it defines): no unknown or misspelt
    field, no wrong type, the required ``schemaVersion``/``templating``/``annotations``. A real
    Grafana cannot be run here (none is packaged in the registries this project may use), so this
    is the check that the dashboard loads in a stock Grafana; a variable ``current`` without
    text/value, or a query variable's object form, were what it caught."""
    schema = json.loads(GRAFANA_SCHEMA.read_text())
    dashboard = json.loads(DASHBOARD.read_text())
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(dashboard)]
    assert errors == []
    # the check has teeth: a misspelt field and a wrong type are refused
    broken = {**dashboard, "refesh": "30s", "panels": [{**dashboard["panels"][1], "gridPos": {"x": "0"}}]}
    found = {(tuple(e.absolute_path), e.validator) for e in validator.iter_errors(broken)}
    assert found == {((), "additionalProperties"), (("panels", 0), "oneOf")}, found


def test_every_metric_a_panel_queries_is_one_kadmit_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = {f.name: f for f in FAMILIES}
    queried: set[str] = set()
    for panel in panels(dashboard):
        for target in panel.get("targets") or []:
            queried |= set(re.findall(r"\b(?:kueue|kadmit|multikueue)_[a-z_]+", target["expr"]))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queried |= set(re.findall(r"\b(?:kueue|kadmit|multikueue)_[a-z_]+", variable["query"]))
    assert queried
    for series in sorted(queried):
        family = series
        for suffix in HISTOGRAM_SERIES:
            if series.endswith(suffix) and series.removesuffix(suffix) in exported:
                family = series.removesuffix(suffix)
                assert exported[family].kind == "histogram", series
        assert family in exported, f"{series} is not a metric kadmit exports"
        assert family not in WITHOUT_SERIES, f"{series} never has series"
    questions = {
        "kueue_pending_workloads",
        "kueue_unadmitted_workloads",
        "kueue_admitted_workloads_total",
        "kueue_admission_wait_time_seconds_bucket",
        "kueue_cluster_queue_resource_usage",
        "kueue_cluster_queue_nominal_quota",
        "kueue_cluster_queue_borrowing_limit",
        "kueue_cohort_subtree_quota",
        "kueue_preempted_workloads_total",
        "kueue_evicted_workloads_total",
    }
    assert questions <= queried, questions - queried
