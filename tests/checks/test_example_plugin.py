"""The example plugin of docs/checks.md, loaded as kadmit loads plugins and run with the testing kit."""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import pytest_asyncio

from kadmit.checks.discovery import load
from kadmit.checks.testing import LocalKueue
from kadmit.kube.resources import WORKLOADS
from kadmit.workload import ADMITTED, is_true
from tests.checks.conftest import ROOT

EXAMPLE = ROOT / "examples" / "business-hours"
MONDAY_10 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
FRIDAY_20 = datetime(2026, 11, 27, 20, 0, tzinfo=UTC)


@pytest.fixture
def example_on_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    yield EXAMPLE


# One kit for the module: the cluster tests move its clock instead of starting another.
@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kueue() -> AsyncIterator[LocalKueue]:
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(EXAMPLE))
        plugin = load("kadmit_business_hours:BusinessHoursCheck")  # as kadmit loads it, not installed
    async with LocalKueue(plugin) as kueue:
        await kueue.cluster_queue("cq", cpu="32", checks=["business-hours"])
        yield kueue


def test_the_declared_entry_point_names_a_loadable_plugin(example_on_path: Path) -> None:
    project = tomllib.loads((example_on_path / "pyproject.toml").read_text())
    [(name, target)] = project["project"]["entry-points"]["kadmit.checks"].items()
    assert name == "business-hours"
    assert load(target).controller_name == "example.com/business-hours"


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    ("clock", "state", "message"),
    [
        (MONDAY_10, "Ready", "within business hours"),
        (FRIDAY_20, "Pending", "8 pods wait for business hours, from Mon 09:00 UTC"),
    ],
    ids=["monday-10", "friday-20"],
)
async def test_big_workloads_wait_for_business_hours_and_small_ones_do_not(
    kueue: LocalKueue, clock: datetime, state: str, message: str
) -> None:
    kueue.clock = clock.timestamp
    label = f"{clock:%a}".lower()
    big = await kueue.submit_job(f"big-{label}", pods=8)
    small = await kueue.submit_job(f"small-{label}", pods=2)
    decided = await kueue.check_state(big, "business-hours")
    assert (decided["state"], decided["message"]) == (state, message)
    small_entry = await kueue.check_state(small, "business-hours")
    assert (small_entry["state"], small_entry["message"]) == ("Ready", "2 pods: small enough for any time")
    await kueue.admitted(small)
    if state == "Ready":
        await kueue.admitted(big)
    else:  # decided and written: nothing else could admit it now
        now = await kueue.client.get(WORKLOADS, big["metadata"]["namespace"], big["metadata"]["name"])
        assert not is_true(now, ADMITTED)


def test_the_documentation_shows_the_example_as_shipped() -> None:
    shipped = (EXAMPLE / "kadmit_business_hours.py").read_text()
    code = shipped.split('"""', 2)[2].strip()  # without the module docstring
    blocks = (ROOT / "docs" / "checks.md").read_text().split("```python\n")
    assert any(block.split("```", 1)[0].strip() == code for block in blocks[1:])


def test_the_documentation_shows_the_examples_tests_as_shipped() -> None:
    tests = (EXAMPLE / "test_business_hours.py").read_text()
    blocks = [block.split("```", 1)[0].strip() for block in
              (ROOT / "docs" / "checks.md").read_text().split("```python\n")[1:]]
    assert any("kueue.clock" in block and block in tests for block in blocks)


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
