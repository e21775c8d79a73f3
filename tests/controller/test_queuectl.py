"""The queue CLI's pure parts: what a flavor lacks and what a cohort could lend, the kubeconfig's
namespace, ages and tables."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from kadmit.controller.queuectl import (
    age,
    current_namespace,
    flavor_gaps,
    owned_by_matches,
    table,
    total_requests,
    waiting_reason,
)
from tests.engine.conftest import T0, cluster_queue, cohort, pod_set, quotas, workload


def cq(name: str, cohort: str | None, cpu: Any, used: str, **spec: Any) -> dict[str, Any]:
    obj = cluster_queue(name, quotas({"on-demand": {"cpu": cpu}}), cohort=cohort, **spec)
    obj["status"] = {
        "flavorsReservation": [{"name": "on-demand", "resources": [{"name": "cpu", "total": used}]}]
    }
    return obj


def sentences(requests: dict[str, int], target: dict[str, Any], *members: dict[str, Any]) -> list[str]:
    return [gap.sentence() for gap in flavor_gaps(requests, target, [target, *members])]


def test_no_cohort_says_what_is_missing() -> None:
    alone = cq("a", None, 4, "3")
    assert sentences({"cpu": 3000}, alone) == [
        "needs 2 more cpu in flavor on-demand (3 of 4 in use, no cohort to borrow from): "
        "it waits for running workloads to free it"
    ]


def test_the_cohort_lends_what_others_do_not_use_of_their_lendable_quota() -> None:
    mine = cq("a", "team", 4, "3")
    other = cq("b", "team", (4, None, 2), "3")  # lends at most 2; uses 1 of them
    assert sentences({"cpu": 3000}, mine, other) == [
        "needs 2 more cpu in flavor on-demand; cohort team could lend 1, "
        "1 short until running workloads free it"
    ]
    idle = cq("b", "team", (4, None, 2), "0")
    assert sentences({"cpu": 3000}, mine, idle) == [
        "needs 2 more cpu in flavor on-demand; cohort team could lend 2 (enough, by borrowing)"
    ]


def test_a_borrowing_limit_bounds_the_loan_and_what_could_ever_fit() -> None:
    mine = cq("a", "team", (4, 1), "4")
    other = cq("b", "team", 8, "0")
    assert sentences({"cpu": 3000}, mine, other) == [
        "needs 3 more cpu in flavor on-demand; cohort team could lend 1, "
        "2 short until running workloads free it"
    ]
    assert sentences({"cpu": 6000}, mine, other) == [
        "nothing, as the quotas stand: it asks 6 cpu, flavor on-demand can give it 5 cpu "
        "(its nominal 4 and at most 1 borrowed from cohort team)"
    ]


def test_a_cohort_lends_its_own_quota_and_its_parents_as_the_engine_counts_them() -> None:
    """The tree, not the flat list of sibling ClusterQueues: ``team`` has no other member, but
    the Cohort ``team`` holds 2 cpu of its own and sits under ``org``, which holds 3 and has a
    ClusterQueue ``b`` that uses 6 of 8."""
    mine = cq("a", "team", 4, "4")
    b = cq("b", "org", 8, "6")
    team = cohort("team", "org", quotas({"on-demand": {"cpu": 2}}))
    org = cohort("org", None, quotas({"on-demand": {"cpu": 3}}))
    # a: 4 own (all used); team: +2; org: +3 own, + b's unused 2 -> 7 could be lent now
    assert [g.sentence() for g in flavor_gaps({"cpu": 5000}, mine, [mine, b], [team, org])] == [
        "needs 5 more cpu in flavor on-demand; cohort team could lend 7 (enough, by borrowing)"
    ]
    # what could ever fit: 4 + 2 + 3 + 8 = 17
    assert [g.most for g in flavor_gaps({"cpu": 5000}, mine, [mine, b], [team, org])] == [17000]
    # without the Cohorts (the flat view of the ClusterQueues named "team"), it could never fit
    assert [g.sentence() for g in flavor_gaps({"cpu": 5000}, mine, [mine], [])] == [
        "nothing, as the quotas stand: it asks 5 cpu, flavor on-demand can give it 4 cpu "
        "(its nominal 4 and at most 0 borrowed from cohort team)"
    ]


def test_a_cohort_lending_limit_caps_what_its_subtree_gives_away() -> None:
    mine = cq("a", "left", 4, "4")
    sibling = cq("s", "right", 8, "0")
    right = cohort("right", "root", quotas({"on-demand": {"cpu": (0, None, 2)}}))  # lends 2 of its subtree
    left = cohort("left", "root")
    root = cohort("root")
    assert [g.sentence() for g in flavor_gaps({"cpu": 4000}, mine, [mine, sibling], [left, right, root])] == [
        "needs 4 more cpu in flavor on-demand; cohort left could lend 2, "
        "2 short until running workloads free it"
    ]


def test_requests_are_summed_over_pod_sets_and_counts() -> None:
    wl = workload(
        "w", pod_sets=[pod_set(3, requests={"cpu": "500m"}), pod_set(1, name="driver", requests={"cpu": "2"})]
    )
    assert total_requests(wl) == {"cpu": 3500}


def test_requests_are_the_schedulers_once_it_counted_them() -> None:
    # status.resourceRequests carries LimitRange defaults and RuntimeClass overhead the spec lacks.
    wl = workload("w", pod_sets=[pod_set(2, requests={"cpu": "1"})])
    wl["status"] = {"resourceRequests": [{"name": "main", "resources": {"cpu": "2500m", "memory": "320Mi"}}]}
    assert total_requests(wl) == {"cpu": 2500, "memory": 320 * 2**20 * 1000}
    wl["status"]["resourceRequests"][0]["resources"]["cpu"] = "lots"  # not the scheduler's: the spec
    assert total_requests(wl) == {"cpu": 2000}


def test_waiting_reason_reads_the_conditions() -> None:
    wl = workload("w")
    assert waiting_reason(wl) == "waiting to be evaluated"
    wl["status"] = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": "couldn't assign flavors",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    assert waiting_reason(wl) == "couldn't assign flavors"
    wl["spec"]["active"] = False
    assert waiting_reason(wl) == "stopped (spec.active is false)"


def test_namespace_from_the_kubeconfig_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: one\ncontexts:\n"
        "- name: one\n  context: {cluster: c, user: u, namespace: team-a}\n"
        "- name: two\n  context: {cluster: c, user: u}\n"
    )
    assert current_namespace(str(config), None) == "team-a"
    assert current_namespace(str(config), "two") == "default"
    monkeypatch.setenv("KUBECONFIG", str(config))
    assert current_namespace(None, None) == "team-a"


def test_ages_as_kubectl_prints_them() -> None:
    assert age("2026-01-01T00:00:00Z", T0 + 42) == "42s"
    assert age("2026-01-01T00:00:00Z", T0 + 5 * 60 + 3) == "5m3s"
    assert age("2026-01-01T00:00:00Z", T0 + 90 * 60) == "90m"
    assert age("2026-01-01T00:00:00Z", T0 + 5 * 3600) == "5h"
    assert age("2026-01-01T00:00:00Z", T0 + 3 * 86400) == "3d"
    assert age(None, T0) == "<unknown>"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_tables_align_and_cut_the_last_column_to_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [["a", "x" * 100], ["bbb", "short"]]
    piped = io.StringIO()
    table(["NAME", "REASON"], rows, piped)
    assert piped.getvalue().splitlines() == ["NAME   REASON", "a      " + "x" * 100, "bbb    short"]
    monkeypatch.setenv("COLUMNS", "40")
    terminal = Terminal()
    table(["NAME", "REASON"], rows, terminal)
    lines = terminal.getvalue().splitlines()
    assert len(lines[1]) == 40 and lines[1].endswith("…")


def test_for_matches_the_owner_as_kueuectl() -> None:
    wl = workload("w")
    wl["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "sample", "uid": "u"}
    ]
    assert owned_by_matches(wl, "job/sample")
    assert owned_by_matches(wl, "jobs/sample")
    assert owned_by_matches(wl, "job.batch/sample")
    assert not owned_by_matches(wl, "job/other")
    assert not owned_by_matches(wl, "jobset/sample")
