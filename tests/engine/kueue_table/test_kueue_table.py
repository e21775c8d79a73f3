"""Kueue's own scheduler test tables, run on kadmit's engine.

Each YAML file here holds cases translated from one of Kueue's table tests
(``pkg/scheduler/scheduler_test.go`` ``TestSchedule``, ``pkg/scheduler/preemption/*_test.go``):
the setup (flavors, ClusterQueues, Cohorts, LocalQueues, Workloads, some holding quota) and what
Kueue expects after **one** scheduling cycle: the admissions (ClusterQueue, flavor per resource,
count), the preemption victims (with their reason when the case says), and the pending reasons.
The engine runs with ``max_rounds=1``, which is exactly one Kueue cycle.

A case that reaches into Kueue's internals (a fake client's error, a metric, an event's text)
and has no black-box meaning is kept with ``skip:`` and the reason; a case showing a real
difference kadmit still has is kept with ``difference:`` (a strict xfail), so the counts stay
honest.

Format (compact, close to Kueue's builders)::

    base: schedule                   # TestSchedule's shared flavors, queues and namespaces
                                     # (a case may say its own base, or base: null: then
                                     # each ClusterQueue gets a LocalQueue default/<name>)
    fairSharing: true                # file-wide (a case may override), like strategies
    cases:
    - name: <Kueue's case name>
      fairSharing: false
      strategies: [LessThanInitialShare]
      flavors: [{name: f, taints: [...]}]
      clusterQueues:
      - name: cq
        cohort: c
        strategy: StrictFIFO
        preemption: {withinClusterQueue: LowerPriority, ...}
        fungibility: {whenCanBorrow: ..., whenCanPreempt: ..., preference: ...}
        groups: [{on-demand: {cpu: 50}, spot: {cpu: [100, 0]}}]   # [nominal, borrowing, lending]
      cohorts: [{name: c, parent: p, groups: [...]}]
      localQueues: [eng-alpha/other: other-alpha]
      limitRanges: [{name: sales/alpha, limits: [{type: Container, max: {cpu: 300m}}]}]
      workloads:
      - {name: ns/wl, queue: main, cpu: 50, priority: 0, created: 0}
      - {name: ns/big, queue: main, podSets: [{name: one, count: 10, minCount: 5, cpu: 1}]}
      - {name: ns/lws, podSets: [{name: worker, cpu: 2, group: g1}, {name: leader, cpu: 1, group: g1}]}
                                                    # group: topologyRequest.podSetGroupName
      - {name: ns/run, queue: main, cpu: 5, admitted: {cq: cq, flavors: {cpu: on-demand}}}
      - {name: ns/x, requests: {r1: 16}}            # any other resource
      - {name: ns/new, cpu: 6, annotations: {kueue.x-k8s.io/workload-slice-replacement-for: ns/run}}
      # admitted.flavors may be a list: one mapping per pod set
      want:
        admitted: {ns/wl: {cq: cq, flavors: {cpu: spot}, count: 10}}
        # or per pod set: {ns/wl: {cq: cq, podSets: [{name: one, flavors: {...}, count: 10}]}}
        preempted: {ns/run: InClusterQueue}          # or a list of names
        pending: {ns/other: WaitingForQuota}
        messages: {ns/other: "couldn't assign flavors to pod set main: ..."}   # pending messages
        replaced: {ns/new: ns/run}                   # a Workload slice and the one it replaces
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kadmit.engine import Engine
from kadmit.engine.quantity import format_milli, to_milli
from kadmit.engine.timestamps import format_time

HERE = Path(__file__).resolve().parent
API = "kueue.x-k8s.io/v1beta2"
T0 = 1_767_225_600.0
Obj = dict[str, Any]


def _load_cases() -> list[Any]:
    params = []
    for path in sorted(HERE.glob("*.yaml")):
        if path.name.startswith("base_"):
            continue
        document = yaml.safe_load(path.read_text())
        base = document.get("base")
        for case in document["cases"]:
            for key in ("fairSharing", "strategies", "localQueuesFor"):  # file-wide, a case may override
                if key in document:
                    case.setdefault(key, document[key])
            marks = []
            if "skip" in case:  # reaches into Kueue's internals: no black-box meaning
                marks.append(pytest.mark.skip(reason=case["skip"]))
            if "difference" in case:  # a real difference kadmit still has: must fail, and says why
                marks.append(pytest.mark.xfail(reason=case["difference"], strict=True))
            own_base = case.get("base", base)  # a case may set its own base, or none (null)
            params.append(pytest.param(own_base, case, id=f"{path.stem}: {case['name']}", marks=marks))
    return params


def _resource_groups(groups: list[dict[str, dict[str, Any]]]) -> list[Obj]:
    out = []
    for group in groups:
        covered: list[str] = []
        flavors = []
        for flavor_name, resources in group.items():
            entries = []
            for res, value in resources.items():
                if res not in covered:
                    covered.append(res)
                entry: Obj = {"name": res}
                if isinstance(value, list):
                    entry["nominalQuota"] = value[0]
                    if len(value) > 1 and value[1] is not None:
                        entry["borrowingLimit"] = value[1]
                    if len(value) > 2 and value[2] is not None:
                        entry["lendingLimit"] = value[2]
                else:
                    entry["nominalQuota"] = value
                entries.append(entry)
            flavors.append({"name": flavor_name, "resources": entries})
        out.append({"coveredResources": covered, "flavors": flavors})
    return out


def _flavor(spec: Obj) -> Obj:
    body: Obj = {}
    if "labels" in spec:
        body["nodeLabels"] = spec["labels"]
    if "taints" in spec:
        body["nodeTaints"] = spec["taints"]
    if "tolerations" in spec:
        body["tolerations"] = spec["tolerations"]
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": spec["name"]}, "spec": body}


def _cluster_queue(spec: Obj) -> Obj:
    body: Obj = {"resourceGroups": _resource_groups(spec.get("groups", []))}
    selector = spec.get("selector")
    if selector is None:
        body["namespaceSelector"] = {}
    elif selector != "none":
        body["namespaceSelector"] = {
            "matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in selector.items()]
        }
    if "cohort" in spec:
        body["cohortName"] = spec["cohort"]
    if "strategy" in spec:
        body["queueingStrategy"] = spec["strategy"]
    if "preemption" in spec:
        body["preemption"] = spec["preemption"]
    if "fungibility" in spec:
        body["flavorFungibility"] = spec["fungibility"]
    if "weight" in spec:
        body["fairSharing"] = {"weight": str(spec["weight"])}
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": spec["name"]}, "spec": body}


def _cohort(spec: Obj) -> Obj:
    body: Obj = {}
    if "parent" in spec:
        body["parentName"] = spec["parent"]
    if "groups" in spec:
        body["resourceGroups"] = _resource_groups(spec["groups"])
    if "weight" in spec:
        body["fairSharing"] = {"weight": str(spec["weight"])}
    return {"apiVersion": API, "kind": "Cohort", "metadata": {"name": spec["name"]}, "spec": body}


def _local_queue(entry: dict[str, str]) -> Obj:
    [(key, cq)] = entry.items()
    namespace, name = key.split("/")
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def _limit_range(spec: Obj) -> Obj:
    namespace, name = spec["name"].split("/")
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"limits": spec["limits"]},
    }


RESOURCE_KEYS = ("cpu", "memory", "gpu", "example.com/gpu", "pods")
"""Keys of a workload or pod set spec that are resource requests (others go in ``requests``)."""


def _requests(spec: Obj) -> dict[str, str]:
    out = {k: str(spec[k]) for k in RESOURCE_KEYS if k in spec}
    out.update({k: str(v) for k, v in (spec.get("requests") or {}).items()})  # any other resource
    return out


def _pod_sets(spec: Obj) -> list[Obj]:
    sets = spec.get("podSets") or [{**spec, "name": "main", "count": spec.get("count", 1)}]
    out = []
    for ps in sets:
        resources: Obj = {"requests": _requests(ps)}
        if "limits" in ps:
            resources["limits"] = {k: str(v) for k, v in ps["limits"].items()}
        pod_spec: Obj = {"containers": [{"name": "c", "resources": resources}]}
        if "tolerations" in ps:
            pod_spec["tolerations"] = ps["tolerations"]
        if "nodeSelector" in ps:
            pod_spec["nodeSelector"] = ps["nodeSelector"]
        if "affinity" in ps:  # required node affinity: a list of terms, each a list of expressions
            terms = {"nodeSelectorTerms": [{"matchExpressions": term} for term in ps["affinity"]]}
            pod_spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}
        entry: Obj = {
            "name": ps.get("name", "main"),
            "count": ps.get("count", 1),
            "template": {"spec": pod_spec},
        }
        if "minCount" in ps:
            entry["minCount"] = ps["minCount"]
        if "group" in ps:
            entry["topologyRequest"] = {"podSetGroupName": ps["group"]}
        out.append(entry)
    return out


def _condition(kind: str, status: str, reason: str, at: float) -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": "",
        "lastTransitionTime": format_time(at),
    }


def _workload(spec: Obj) -> Obj:
    namespace, name = spec["name"].split("/")
    pod_sets = _pod_sets(spec)
    created = T0 + float(spec.get("created", 0))
    body: Obj = {"queueName": spec.get("queue", "main"), "podSets": pod_sets}
    if "priority" in spec:
        body["priority"] = spec["priority"]
    obj: Obj = {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": spec.get("uid", f"uid-{name}"),
            "creationTimestamp": format_time(created),
        },
        "spec": body,
    }
    if "annotations" in spec:
        obj["metadata"]["annotations"] = dict(spec["annotations"])
    if "reclaimablePods" in spec:
        reclaimable = spec["reclaimablePods"].items()
        obj["status"] = {"reclaimablePods": [{"name": k, "count": v} for k, v in reclaimable]}
    admitted = spec.get("admitted")
    if admitted is not None:
        at = T0 + float(admitted.get("at", spec.get("created", 0)))
        assignments = []
        for ps, raw in zip(pod_sets, spec.get("podSets") or [spec], strict=True):
            count = ps["count"]
            usage = {}
            for res, value in _requests(raw).items():
                usage[res] = _times(res, value, count)
            flavors = admitted.get("flavors", {})
            if isinstance(flavors, list):  # one mapping per pod set
                flavors = flavors[len(assignments)]
            assignments.append(
                {
                    "name": ps["name"],
                    "flavors": dict(flavors),
                    "resourceUsage": usage,
                    "count": count,
                }
            )
        conditions = [_condition("QuotaReserved", "True", "QuotaReserved", at)]
        conditions.append(_condition("Admitted", "True", "Admitted", at))
        if admitted.get("evicted"):
            conditions.append(_condition("Evicted", "True", "Preempted", at))
        obj["status"] = {
            "admission": {"clusterQueue": admitted["cq"], "podSetAssignments": assignments},
            "conditions": conditions,
        }
    return obj


def _times(resource: str, value: str, count: int) -> str:
    return format_milli(resource, to_milli(resource, value) * count)


def _objects(base: str | None, case: Obj) -> list[Obj]:
    objects: list[Obj] = []
    sections: list[Obj] = []
    if base:
        sections.append(yaml.safe_load((HERE / f"base_{base}.yaml").read_text()))
    sections.append(case)
    for section in sections:
        objects += [_flavor(f) for f in section.get("flavors", [])]
    for section in sections:
        for ns in section.get("namespaces", []):
            [(name, labels)] = ns.items()
            objects.append(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}
            )
        objects += [_cohort(c) for c in section.get("cohorts", [])]
        objects += [_cluster_queue(cq) for cq in section.get("clusterQueues", [])]
        objects += [_local_queue(lq) for lq in section.get("localQueues", [])]
        objects += [_limit_range(lr) for lr in section.get("limitRanges", [])]
    if not base or case.get("localQueuesFor") == "all":  # each ClusterQueue: LocalQueue default/<name>
        named = {tuple(next(iter(lq)).split("/")) for lq in case.get("localQueues", [])}
        for cq in case.get("clusterQueues", []):
            if ("default", cq["name"]) not in named:
                objects.append(_local_queue({f"default/{cq['name']}": cq["name"]}))
    return objects


@pytest.mark.parametrize(("base", "case"), _load_cases())
def test_kueue_case(base: str | None, case: Obj) -> None:
    options: dict[str, Any] = {"fair_sharing": bool(case.get("fairSharing")), "max_rounds": 1}
    if "strategies" in case:
        options["preemption_strategies"] = case["strategies"]
    engine = Engine(**options)
    for obj in _objects(base, case):
        engine.upsert(obj)
    for spec in case.get("workloads", []):
        engine.upsert_workload(_workload(spec))
    decisions = engine.schedule(T0 + 1000)
    want = case.get("want", {})

    admitted: dict[str, Obj] = {}
    for r in decisions.reservations:
        key = f"{r.workload[0]}/{r.workload[1]}"
        sets = [
            {
                "name": psa["name"],
                "flavors": dict(psa["flavors"]),
                "count": psa["count"],
            }
            for psa in r.admission["podSetAssignments"]
        ]
        expected = (want.get("admitted") or {}).get(key) or {}
        got: Obj = {"cq": r.cluster_queue}
        if "podSets" in expected:
            got["podSets"] = sets
        else:
            merged: dict[str, str] = {}
            for ps in sets:
                merged.update(ps["flavors"])
            got["flavors"] = merged
            if "count" in expected:
                got["count"] = sets[0]["count"]
        admitted[key] = got
    assert admitted == want.get("admitted", {})
    replaced = {f"{r.workload[0]}/{r.workload[1]}": f"{r.replaced[0]}/{r.replaced[1]}"
                for r in decisions.reservations if r.replaced is not None}
    assert replaced == want.get("replaced", {})

    victims = {f"{p.victim[0]}/{p.victim[1]}": p.reason for p in decisions.preemptions}
    wanted_victims = want.get("preempted") or {}
    if isinstance(wanted_victims, list):
        assert sorted(victims) == sorted(wanted_victims)
    else:
        assert victims == wanted_victims

    pending = {f"{p.workload[0]}/{p.workload[1]}": p.reason for p in decisions.pending}
    for key, reason in (want.get("pending") or {}).items():
        assert pending.get(key) == reason, (key, pending)
    messages = {f"{p.workload[0]}/{p.workload[1]}": p.message for p in decisions.pending}
    for key, message in (want.get("messages") or {}).items():
        assert messages.get(key) == message, key
