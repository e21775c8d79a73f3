"""``kadmit simulate``: Kueue's own sample manifests through the real CLI, and its errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kadmit.controller.cli import main

EXAMPLES = Path("/work/shared/kueue-examples")
if not EXAMPLES.is_dir():  # the examples ship beside the repository (shared/)
    EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "kueue-examples"
SETUP = EXAMPLES / "admin__single-clusterqueue-setup.yaml"
SAMPLE_JOB = EXAMPLES / "jobs__sample-job.yaml"
PARTIAL_JOB = EXAMPLES / "jobs__sample-job-partial-admission.yaml"
needs_examples = pytest.mark.skipif(not SETUP.is_file(), reason="Kueue examples not found")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@needs_examples
def test_sample_job_is_admitted_on_default_flavor(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(SETUP), str(SAMPLE_JOB))
    assert code == 0
    [line] = out.splitlines()
    assert line.startswith("default/job-sample-job-")
    assert ": Admitted in cluster-queue: main: 3 pods on default-flavor (cpu, memory)" in line


@needs_examples
def test_partial_admission_sample(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(SETUP), str(PARTIAL_JOB))
    assert code == 0
    assert "main: 9 of 20 pods (partial admission) on default-flavor (cpu, memory)" in out


@needs_examples
def test_output_is_stable_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    first = run(capsys, str(SETUP), str(PARTIAL_JOB), str(SAMPLE_JOB), "--output", "json")
    second = run(capsys, str(SETUP), str(PARTIAL_JOB), str(SAMPLE_JOB), "-o", "json")
    assert first == second
    rows = json.loads(first[1])["workloads"]
    by_job = {row["job"]: row for row in rows}
    assert by_job["sample-job-partial-admission"]["state"] == "Admitted"
    assert by_job["sample-job-partial-admission"]["podSets"][0]["count"] == 9
    [sample] = [
        row for name, row in by_job.items() if name.startswith("sample-job-") and "partial" not in name
    ]
    assert sample["state"] == "Pending"  # 9 cpu all taken by the partial job, created first
    assert sample["reason"] == "WaitingForQuota"
    assert "insufficient unused quota for cpu in flavor default-flavor, 3 more needed" in sample["message"]


@needs_examples
def test_inactive_queue_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    setup = EXAMPLES / "provisioning__provisioning-setup.yaml"
    code, out, _ = run(capsys, str(setup), str(SAMPLE_JOB))
    assert code == 0
    assert "Pending: Suspended: ClusterQueue cluster-queue is inactive (AdmissionCheckInactive:" in out
    code, out, _ = run(capsys, str(setup), str(SAMPLE_JOB), "--checks-ready")
    assert ": Admitted in cluster-queue: main: 3 pods on default-flavor" in out


def test_preemption_settles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "queues.yaml"
    manifest.write_text(
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 2}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: low, namespace: default, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  queueName: lq
  podSets:
  - {name: main, count: 2, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: urgent, namespace: default, creationTimestamp: "2026-01-01T00:01:00Z"}
spec:
  queueName: lq
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}
  podSets:
  - {name: main, count: 2, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
"""
    )
    code, out, _ = run(capsys, str(manifest))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("default/low: Pending: WaitingForQuota:")
    assert lines[1] == "default/urgent: Admitted in cq: main: 2 pods on f (cpu)"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("kind: [unclosed", "invalid YAML at line 1"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "v1 Pod is not something simulate understands"),
        ("- just\n- a list\n", "document 1: not a Kubernetes object"),
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"
            "  namespaceSelectr: {}\n",
            'bad.yaml:5: ClusterQueue "cq": unknown field "spec.namespaceSelectr"',
        ),
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"
            "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources:\n"
            "      - name: cpu\n        nominalQuta: 4\n",
            'bad.yaml:11: ClusterQueue "cq": unknown field '
            '"spec.resourceGroups[0].flavors[0].resources[0].nominalQuta"',
        ),
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq, namespace: default}\n"
            "spec:\n  clusterQueue: [cq]\n",
            'bad.yaml:5: LocalQueue "lq": spec.clusterQueue: Invalid value: "array": must be of type string',
        ),
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: p}\n"
            "value: 10\nvalue: 20\n",
            'bad.yaml:5: duplicate field "value" (first at line 4)',
        ),
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f, lables: {}}\n",
            'bad.yaml:3: ResourceFlavor "f": unknown field "metadata.lables"',
        ),
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\n"
            "spec: {queueingStrategy: LIFO}\n",
            'bad.yaml:4: ClusterQueue "cq": spec.queueingStrategy: Unsupported value: "LIFO": '
            'supported values: "StrictFIFO", "BestEffortFIFO"',
        ),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {namespace: default, labels: "
            "{kueue.x-k8s.io/queue-name: q}}\nspec: {}\n",
            "Job has neither metadata.name nor metadata.generateName",
        ),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, labels: {kueue.x-k8s.io/queue-name: q, "
            "kueue.x-k8s.io/priority-class: nope}}\nspec: {}\n",
            "Job 'j': WorkloadPriorityClass nope not found",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    code, out, err = run(capsys, str(bad))
    assert code == 1  # what the file holds is wrong, not the command line
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("kadmit: error: ")
    assert needle in err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(tmp_path / "absent.yaml"))
    assert code == 1 and "absent.yaml: cannot read" in err


@needs_examples
def test_installed_command(tmp_path: Path) -> None:
    """The real ``kadmit`` entry point, as a user types it."""
    kadmit = shutil.which("kadmit") or str(Path(sys.executable).with_name("kadmit"))
    done = subprocess.run(
        [kadmit, "simulate", str(SETUP), str(SAMPLE_JOB)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Admitted in cluster-queue" in done.stdout
    broken = tmp_path / "broken.yaml"
    broken.write_text(": : :")
    done = subprocess.run(
        [kadmit, "simulate", str(broken)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 1 and done.stderr.startswith("kadmit: error: ")
    done = subprocess.run([kadmit, "simulate", str(broken), "-o", "yaml"], capture_output=True, text=True,
                          check=False, timeout=60)
    assert done.returncode == 2 and "invalid choice: 'yaml'" in done.stderr  # a usage error


@needs_examples
@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_kueue_example_loads_unchanged(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(SETUP), str(EXAMPLES / example), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["workloads"] is not None


@needs_examples
def test_fair_sharing_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(SETUP), str(SAMPLE_JOB), "--fair-sharing")
    assert code == 0
    assert ": Admitted in cluster-queue: main: 3 pods on default-flavor (cpu, memory)" in out


def test_borrowing_is_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "cohort.yaml"
    queues = "\n---\n".join(
        f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohortName: team
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: f, resources: [{{name: cpu, nominalQuota: {quota}}}]}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: lq-{name}, namespace: default}}
spec: {{clusterQueue: {name}}}"""
        for name, quota in (("a", 2), ("b", 4))
    )
    manifest.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\n---\n"
        + queues
        + """
---
apiVersion: batch/v1
kind: Job
metadata: {name: wide, namespace: default, labels: {kueue.x-k8s.io/queue-name: lq-a}}
spec:
  parallelism: 5
  template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
"""
    )
    code, out, _ = run(capsys, str(manifest))
    assert code == 0
    assert "(job wide): Admitted in a (borrowing): main: 5 pods on f (cpu)" in out
    code, out, _ = run(capsys, str(manifest), "-o", "json")
    assert json.loads(out)["workloads"][0]["borrowing"] is True


@pytest.mark.parametrize(
    ("kind", "value", "refused_as"),
    [
        ("integer", True, "boolean"),
        ("integer", 1.5, "number"),
        ("number", False, "boolean"),
        ("number", "1", "string"),
        ("boolean", 0, "integer"),
        ("object", [], "array"),
        ("array", {}, "object"),
        ("string", None, None),  # null: dropped, as the API server drops it
        ("number", 3, None),  # an integer is a number
        ("integer", 3, None),
    ],
)
def test_schema_types_as_the_api_server_tells_them_apart(
    kind: str, value: object, refused_as: str | None
) -> None:
    from kadmit.controller import strict

    schema = {"type": "object", "properties": {"x": {"type": kind}}}
    found = [message for _, message in strict.errors({"x": value}, schema)]
    expected = [] if refused_as is None else [f'x: Invalid value: "{refused_as}": must be of type {kind}']
    assert found == expected


@needs_examples
def test_a_limit_range_defaults_and_bounds_the_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The sample job asks 1 cpu per pod (3 pods); a LimitRange of its namespace caps a container
    # at 500m: Kueue keeps it pending, Misconfigured. A container without requests gets the
    # LimitRange's defaultRequest counted.
    limits = tmp_path / "limits.yaml"
    limits.write_text(
        """
apiVersion: v1
kind: LimitRange
metadata: {name: small, namespace: default}
spec:
  limits:
  - type: Container
    max: {cpu: 500m}
    default: {cpu: 500m, memory: 200Mi}
    defaultRequest: {cpu: 250m, memory: 100Mi}
"""
    )
    code, out, _ = run(capsys, str(SETUP), str(limits), str(SAMPLE_JOB))
    assert code == 0
    assert (
        "Pending: Misconfigured: resources validation failed: "
        'spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu"]: '
        "requests must not exceed its limits"
    ) in out
    bare = tmp_path / "bare.yaml"
    requests = '        resources:\n          requests:\n            cpu: "1"\n            memory: "200Mi"\n'
    assert requests in SAMPLE_JOB.read_text()
    bare.write_text(SAMPLE_JOB.read_text().replace(requests, ""))
    code, out, _ = run(capsys, str(SETUP), str(bare), "-o", "json")
    [row] = json.loads(out)["workloads"]
    assert row["state"] == "Admitted"
    assert row["podSets"][0]["flavors"] == {}  # it asks for nothing: no flavor
    code, out, _ = run(capsys, str(SETUP), str(limits), str(bare), "-o", "json")
    [row] = json.loads(out)["workloads"]
    assert row["state"] == "Admitted"
    assert row["podSets"][0]["flavors"] == {"cpu": "default-flavor", "memory": "default-flavor"}


@needs_examples
def test_a_runtime_class_overhead_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The sample job's 3 pods ask 3 cpu of 9; with a 2-cpu overhead each they ask 9, and a second
    # job waits.
    kata = tmp_path / "kata.yaml"
    kata.write_text(
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: kata}\nhandler: kata\n"
        "overhead: {podFixed: {cpu: '2'}}\n"
    )
    sandboxed = tmp_path / "jobs.yaml"
    never = "      restartPolicy: Never"
    job = SAMPLE_JOB.read_text().replace(never, f"{never}\n      runtimeClassName: kata")
    assert "runtimeClassName" in job
    sandboxed.write_text(job + "---\n" + job)
    code, out, _ = run(capsys, str(SETUP), str(kata), str(sandboxed), "-o", "json")
    states = sorted(row["state"] for row in json.loads(out)["workloads"])
    assert code == 0 and states == ["Admitted", "Pending"], out
    code, out, _ = run(capsys, str(SETUP), str(sandboxed), "-o", "json")
    assert sorted(row["state"] for row in json.loads(out)["workloads"]) == ["Admitted", "Admitted"]
