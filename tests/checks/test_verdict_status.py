"""A verdict's ``status``: the check's own Workload status fields land in the write of its state."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from kadmit.checks.verdict import Pending, Ready, Verdict
from kadmit.kube.resources import ADMISSION_CHECKS, WORKLOADS
from tests.checks.conftest import NAMESPACE, KueueCluster, active_is, has_state
from tests.checks.test_runner import Scripted

Obj = dict[str, Any]


def _dispatching(call: int) -> Verdict:
    """MultiKueue's shape: nominate, widen the nomination, then name the winner."""
    if call == 1:
        return Pending("dispatched", recheck_after=0.2, status={"nominatedClusterNames": ["w1"]})
    if call == 2:  # the same state and message: only the field changes
        return Pending("dispatched", recheck_after=0.2, status={"nominatedClusterNames": ["w1", "w2"]})
    return Ready('admitted on "w2"', status={"clusterName": "w2", "nominatedClusterNames": None})


async def test_the_fields_are_written_with_the_state_one_write_per_change(kueue: KueueCluster) -> None:
    plugin = Scripted()
    plugin.actions["dispatched"] = _dispatching
    await kueue.admission_check("mk", plugin.controller_name)
    await kueue.cluster_queue("cq", [{"name": "mk"}])
    wl = await kueue.workload("dispatched")
    # Every version the watch delivers: on a busy machine the next write can land before a
    # waiter looks, so the first nomination is read from the events, not from the cache.
    seen: list[Obj] = []

    def record(event: str, obj: Obj, old: Obj | None) -> None:
        if obj["metadata"]["name"] == "dispatched":
            seen.append(copy.deepcopy(obj))

    (await kueue.pool.watch(WORKLOADS)).add_handler(record)
    async with kueue.running([plugin]) as runner:
        await kueue.wait_for(ADMISSION_CHECKS, None, "mk", active_is("True"))
        before = runner.writes  # the AdmissionCheck's Active condition
        await kueue.reserve(wl, "cq")
        done = await kueue.wait_for(WORKLOADS, NAMESPACE, "dispatched", has_state("mk", "Ready"))
        nominated = [w for w in seen if "nominatedClusterNames" in (w.get("status") or {})]
        values = [w["status"]["nominatedClusterNames"] for w in nominated]
        assert [value for value, _ in itertools.groupby(values)] == [["w1"], ["w1", "w2"]]
        assert has_state("mk", "Pending")(nominated[0]), "the field came with the state, not before it"
        assert done["status"]["clusterName"] == "w2"
        assert "nominatedClusterNames" not in done["status"], "None removes the field"
        assert plugin.calls["dispatched"] == 3
        assert runner.writes - before == 3, "one write per verdict that changed something, fields too"
        assert runner.conflicts == 0


@pytest.mark.parametrize("verdict", [Ready, Pending])
def test_a_verdict_sets_only_the_fields_kueue_leaves_to_checks(verdict: type[Ready] | type[Pending]) -> None:
    with pytest.raises(ValueError, match="may set only clusterName, nominatedClusterNames; got admission"):
        verdict("no", status={"admission": {"clusterQueue": "elsewhere"}})
