"""The example plugin of docs/checks.md, loaded as kadmit loads plugins and run on the local cluster."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kadmit.checks.discovery import load
from kadmit.kube.resources import WORKLOADS
from tests.checks.conftest import NAMESPACE, ROOT, KueueCluster, has_state, state_of

EXAMPLE = ROOT / "examples" / "business-hours"
MONDAY_10 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
FRIDAY_20 = datetime(2026, 11, 27, 20, 0, tzinfo=UTC)


@pytest.fixture
def example_on_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    yield EXAMPLE


def test_the_declared_entry_point_names_a_loadable_plugin(example_on_path: Path) -> None:
    project = tomllib.loads((example_on_path / "pyproject.toml").read_text())
    [(name, target)] = project["project"]["entry-points"]["kadmit.checks"].items()
    assert name == "business-hours"
    assert load(target).controller_name == "example.com/business-hours"


@pytest.mark.parametrize(
    ("clock", "state", "message"),
    [
        (MONDAY_10, "Ready", "within business hours"),
        (FRIDAY_20, "Pending", "8 pods wait for business hours, from Mon 09:00 UTC"),
    ],
)
async def test_big_workloads_wait_for_business_hours_on_the_cluster(
    example_on_path: Path, kueue: KueueCluster, clock: datetime, state: str, message: str
) -> None:
    plugin = load("kadmit_business_hours:BusinessHoursCheck")
    await kueue.admission_check("business-hours", plugin.controller_name)
    await kueue.cluster_queue("cq", [{"name": "business-hours"}])
    big, small = await kueue.workload("big", pods=8), await kueue.workload("small", pods=2)
    async with kueue.running([plugin], clock=clock.timestamp):
        await kueue.reserve(big, "cq")
        await kueue.reserve(small, "cq")
        decided = await kueue.wait_for(WORKLOADS, NAMESPACE, "big", has_state("business-hours", state))
        await kueue.wait_for(WORKLOADS, NAMESPACE, "small", has_state("business-hours", "Ready"))
    assert (state_of(decided, "business-hours") or {})["message"] == message


def test_the_documentation_shows_the_example_as_shipped() -> None:
    shipped = (EXAMPLE / "kadmit_business_hours.py").read_text()
    code = shipped.split('"""', 2)[2].strip()  # without the module docstring
    blocks = (ROOT / "docs" / "checks.md").read_text().split("```python\n")
    assert any(block.split("```", 1)[0].strip() == code for block in blocks[1:])


def test_the_example_reads_its_settings_from_kadmits_configuration(example_on_path: Path) -> None:
    from kadmit.checks.discovery import PluginError

    document = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "admissionChecks": {"settings": {"business-hours": {"smallPodCount": 16}}}}
    plugin = load("kadmit_business_hours:BusinessHoursCheck", document)
    assert plugin.small_pod_count == 16  # type: ignore[attr-defined]
    assert load("kadmit_business_hours:BusinessHoursCheck").small_pod_count == 4  # type: ignore[attr-defined]
    document["admissionChecks"]["settings"]["business-hours"]["smallPodCount"] = "many"
    with pytest.raises(PluginError, match="smallPodCount: not a count: 'many'"):
        load("kadmit_business_hours:BusinessHoursCheck", document)
