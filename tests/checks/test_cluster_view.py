"""A plugin's own status patch, and the copy the runner writes its check states over."""

from __future__ import annotations

from kadmit.checks.plugin import ClusterView
from kadmit.kube.resources import WORKLOADS
from tests.checks.conftest import NAMESPACE, KueueCluster


async def test_the_runner_writes_over_a_plugins_own_patch_not_over_anyone_elses(kueue: KueueCluster) -> None:
    view = ClusterView({}, kueue.api)
    evaluated = await kueue.workload("patched")
    # Only the plugin's patch happened since the evaluated copy: the patched copy is the base.
    written = await view.patch_workload_status(evaluated, {"nominatedClusterNames": ["w1"]})
    assert written["metadata"]["resourceVersion"] != evaluated["metadata"]["resourceVersion"]
    assert view.patched_over(evaluated) is written
    assert view.patched_over(evaluated) is evaluated, "a patch is used once"

    # Someone else wrote between the evaluated copy and the plugin's patch: the evaluated copy
    # stays the base, so the runner's write conflicts and the check is evaluated again.
    evaluated = await kueue.get(WORKLOADS, NAMESPACE, "patched")
    await kueue.update_status(WORKLOADS, NAMESPACE, "patched", lambda status: status.update(clusterName="w2"))
    await view.patch_workload_status(evaluated, {"nominatedClusterNames": None})
    assert view.patched_over(evaluated) is evaluated

    # A patch that removes a field is applied as the API server does.
    evaluated = await kueue.get(WORKLOADS, NAMESPACE, "patched")
    assert evaluated["status"]["clusterName"] == "w2"
    written = await view.patch_workload_status(evaluated, {"clusterName": None})
    assert "clusterName" not in written["status"]
    assert view.patched_over(evaluated) is written
