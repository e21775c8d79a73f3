"""Least privilege, the necessary half: every rule of kadmit's roles is used, or says why not.

The local API server enforces RBAC and records every request by user, verb and resource. kadmit
runs on its ServiceAccount bound to exactly ``manifests/base/rbac.yaml`` through a full scenario
(leader election, its own certificates and CA injection, Jobs and a JobSet through the webhooks,
a preemption, a deleted Job, a scrape of its secure /metrics), and the test reports each
(verb, resource) of each rule of its ClusterRole and Role that no request used. A rule with no
use at all must carry a comment line ``# Unexercised: <why>`` in the manifest: the scenario
cannot reach it (another plugin, a real API server's admission plugin) and the comment says
what needs it. The report is printed (``pytest -s``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kadmit.controller import local_setup
from kadmit.controller.config import LeaderElection
from kadmit.kube.resources import CLUSTER_QUEUES, JOBS, JOBSETS, RESOURCE_FLAVORS, WORKLOADS
from kadmit.localcluster.rbac import Attributes, AuditEntry, rule_allows
from tests.e2e.conftest import MANIFESTS, WebhookEnv, eventually, fast_config, webhook_env
from tests.e2e.helpers import apply_small_setup, condition, job
from tests.e2e.test_jobset import jobset, replicated_job
from tests.e2e.test_metrics_auth import bind_metrics_reader, scrape

Obj = dict[str, Any]
RBAC_FILE = MANIFESTS / "base" / "rbac.yaml"
MARKER = "# Unexercised:"


def rule_comments(path: Path) -> dict[tuple[str, str], list[list[str]]]:
    """The comment lines right above each rule of each Role/ClusterRole, by (kind, name)."""
    out: dict[tuple[str, str], list[list[str]]] = {}
    for document in path.read_text().split("\n---\n"):
        lines = document.splitlines()
        kind = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("kind:")), "")
        name = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("  name:")), "")
        if "rules:" not in lines:
            continue
        comments: list[str] = []
        rules: list[list[str]] = []
        for line in lines[lines.index("rules:") + 1 :]:
            if line.startswith("#"):
                comments.append(line)
            elif line.startswith("- "):
                rules.append(comments)
                comments = []
        out[(kind, name)] = rules
    return out


def expansions(rule: Obj) -> Iterator[tuple[str, str, str]]:
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for verb in rule.get("verbs") or []:
                yield group, resource, verb


def used(rule: Obj, group: str, resource: str, verb: str, entries: list[AuditEntry], namespace: str) -> bool:
    """Whether a request kadmit made needed this one (group, resource, verb) of the rule."""
    narrowed = {**rule, "apiGroups": [group], "resources": [resource], "verbs": [verb]}
    for entry in entries:
        if not entry.allowed or not entry.resource_request or (namespace and entry.namespace != namespace):
            continue
        attrs: Attributes = entry.attributes()
        if rule_allows(narrowed, attrs):
            return True
    return False


def unused_report(
    roles: list[Obj], entries: list[AuditEntry]
) -> tuple[list[str], list[tuple[str, int, Obj]]]:
    """(report lines, rules with no use at all as (role, index, rule))."""
    lines: list[str] = []
    idle: list[tuple[str, int, Obj]] = []
    for role in roles:
        label = f"{role['kind']} {role['metadata']['name']}"
        namespace = role["metadata"].get("namespace", "")
        for index, rule in enumerate(role.get("rules") or []):
            missing = [
                f"{verb} {group or 'core'}/{resource}"
                for group, resource, verb in expansions(rule)
                if not used(rule, group, resource, verb, entries, namespace)
            ]
            total = sum(1 for _ in expansions(rule))
            if missing and len(missing) == total:
                idle.append((label, index, rule))
                lines.append(f"{label} rule {index}: UNUSED {rule}")
            elif missing:
                names = f" resourceNames={rule['resourceNames']}" if rule.get("resourceNames") else ""
                lines.append(f"{label} rule {index}{names}: unused {', '.join(missing)}")
    return lines, idle


@pytest.fixture
async def scenario() -> AsyncIterator[WebhookEnv]:
    config = dataclasses.replace(
        fast_config(),
        leader_election=LeaderElection(lease_duration=4, renew_deadline=3, retry_period=0.5),
        frameworks=("batch/job", "jobset.x-k8s.io/jobset"),
    )
    async for env in webhook_env(config=config, leader_election=True, metrics_secure=True):
        yield env


async def test_every_rule_of_kadmits_roles_is_used_or_says_why(scenario: WebhookEnv) -> None:
    kube, cluster = scenario.kube, scenario.cluster
    await apply_small_setup(kube)
    await kube.create(
        JOBS, job("low", cpu="1", parallelism=3, runtime="3s", queue="small", priority_class="low")
    )

    async def running(name: str) -> bool:
        current = await kube.get(JOBS, "default", name)
        return current["spec"].get("suspend") is False

    await eventually(lambda: running("low"), what="the low-priority Job started")
    await kube.create(
        JOBS, job("high", cpu="1", parallelism=2, runtime="200ms", queue="small", priority_class="high")
    )

    async def complete(name: str) -> bool:
        return condition(await kube.get(JOBS, "default", name), "Complete") == "True"

    await eventually(
        lambda: complete("high"), within=30, what="the high-priority Job done after a preemption"
    )
    await kube.create(JOBSETS, jobset("set", replicated_job("driver", 1, 1), replicated_job("workers", 1, 2)))

    async def jobset_done() -> bool:
        conditions = (await kube.get(JOBSETS, "default", "set")).get("status", {}).get("conditions") or []
        return any(c["type"] == "Completed" and c["status"] == "True" for c in conditions)

    await eventually(jobset_done, within=30, what="the JobSet completed")
    await eventually(lambda: complete("low"), within=30, what="the preempted Job readmitted and done")
    await kube.create(JOBS, job("gone", cpu="100", parallelism=1, queue="small"))  # never fits

    async def workload_of_gone() -> bool:
        items = (await kube.list(WORKLOADS, "default"))["items"]
        return any(w["metadata"]["name"].startswith("job-gone-") for w in items)

    await eventually(workload_of_gone, what="the too-big Job's Workload")
    await kube.delete(JOBS, "default", "gone", propagation_policy="Background")

    async def workload_gone() -> bool:
        return not await workload_of_gone()

    await eventually(workload_gone, what="kadmit to let the deleted Job's Workload go")

    # the queues go once unused: kadmit lifts the in-use finalizer it put on them
    await kube.delete(CLUSTER_QUEUES, None, "small")
    await kube.delete(RESOURCE_FLAVORS, None, "cpu")

    async def queues_gone() -> bool:
        return (
            not (await kube.list(CLUSTER_QUEUES))["items"]
            and not (await kube.list(RESOURCE_FLAVORS))["items"]
        )

    await eventually(queues_gone, what="the deleted ClusterQueue and ResourceFlavor gone")
    await bind_metrics_reader(kube, "monitoring", "prometheus")
    token = await local_setup.service_account_token(kube, "monitoring", "prometheus", seconds=3600)
    assert scenario.app is not None and scenario.app.metrics_port is not None
    assert (await scrape(scenario.app.metrics_port, token))[0] == 200

    entries = cluster.audit.of(local_setup.controller_username("kadmit-system"))
    roles = [
        doc
        for doc in local_setup.rbac_documents("kadmit-system")
        if doc["kind"] in ("ClusterRole", "Role") and doc["metadata"]["name"].startswith("kadmit-m")
    ]
    lines, idle = unused_report(roles, entries)
    print("\nRBAC rules of kadmit's roles no request used in the scenario:")
    print("\n".join(lines) or "(none)")
    comments = rule_comments(RBAC_FILE)
    undocumented = []
    for label, index, rule in idle:
        kind, name = label.split(" ", 1)
        if not any(line.startswith(MARKER) for line in comments[(kind, name)][index]):
            undocumented.append(f"{label} rule {index}: {rule}")
    assert undocumented == [], f"unused rules without a '{MARKER} <why>' comment: {undocumented}"
