"""The fault suite, long version: kadmit on a bad day, with figures.

    python bench/chaos.py [--jobs 500] [--kills 100] [--error-rate 0.05] [--hang-rate 0.02]
                          [--gone-rate 0.1] [--faults FILE] [--leader-trials 50] [--fuzz 10000]
                          [--partitions 20] [--parts kills,leadership,partitions,fuzz] [--seed 1] [--quick]

Four parts, each printing its figures (tests/chaos/ runs the same machinery CI-sized):

* **kills**: ``kadmit run`` (leader election on, a 2 s Lease) against a local cluster with
  simulated nodes, SIGKILLed ``--kills`` times at random moments (every 1 to 6 s) and started
  again at once, while ``--jobs`` Jobs (1 or 2 pods of 500m to 2 CPUs, 0.2 to 1 s) arrive for two
  ClusterQueues of one cohort. Meanwhile the API server answers ``--error-rate`` of all requests
  with 500, 503 or 429 (Retry-After 1 s), hangs ``--hang-rate`` of them (never handled, the
  connection cut after 3 s), answers ``--gone-rate`` of watches with 410 and cuts every watch
  within 20 s (or whatever ``--faults FILE`` says: a plan as ``kadmit local --faults`` reads).
  Every committed change of Workloads, ClusterQueues and Jobs is checked as it is committed
  (tests/chaos/harness.py: quota per queue and per cohort, each queue's reported reservation, no
  Job started without an admitted, non-evicted Workload); at the end every Job must be complete,
  every Workload finished and no quota held. Prints violations (must be 0), Jobs completed, wall
  time, the faults injected.
* **leadership**: two replicas (kadmit's Manager behind its LeaderElector, each on a token of its
  own); in each of ``--leader-trials`` trials both clocks jump to a new skew (±20 s) and the
  leader's Lease requests hang 0.5 to 4 s while a Job arrives. Every write of theirs is checked
  against the Lease's holder when it was committed: prints the moments with two leaders acting
  (must be 0) and how often the Lease changed hands.
* **partitions**: MultiKueue with two workers (4 CPUs each); ``--partitions`` times a Job is
  submitted and the manager's link to one worker is cut (connections reset, new ones unanswered)
  for 0.3 to 4 s, shorter than the workers' lost timeout (10 s), then healed. Prints the Jobs
  started in two clusters and the Jobs lost (both must be 0).
* **fuzz**: ``--fuzz`` AdmissionReviews made by Hypothesis, over TLS to kadmit's webhook server (in
  a process of its own, every path of kadmit's webhook configurations): Kueue's samples of every
  kind with subtrees replaced by random JSON and quantities by random ones (huge exponents,
  thousands of digits, every suffix, garbage), wrong operations, kinds and uids, and raw bodies
  that are no review at all (bytes, truncated JSON, deep nesting, NaN, 5,000-digit integers).
  Each answer must be a valid AdmissionReview for that uid or a 4xx with a message; a 5xx, a cut
  connection or a dead server is a crash. Then as many quantities through kadmit's parser
  (``engine/quantity.py``). Prints crashes (must be 0) and the slowest answer (target < 100 ms).

``--quick``: 60 Jobs, 10 kills, 10 trials, 5 partitions, 1,000 reviews (about three minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import http.client
import itertools
import json
import logging
import os
import random
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

# `python bench/X.py` puts bench/ first on sys.path, where bench/webhook.py would shadow the webhook
# package (bench/engine.py the engine one): drop bench/ and import kadmit from the repository root.
# ruff: noqa: E402 (so kadmit's imports come after this)
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.chaos.harness import LEASE, Acting, chaos_world, run_chaos, run_leadership

Obj = dict[str, Any]
SERVICE, NAMESPACE = "kadmit-webhook-service", "kadmit-system"
SLOW_MS = 100.0


def say(line: str) -> None:
    print(line, flush=True)


# ---- kills -------------------------------------------------------------------------------------


def plan_of(args: argparse.Namespace) -> Obj:
    if args.faults:
        document = yaml.safe_load(Path(args.faults).read_text())
        return document if isinstance(document, dict) else {}
    plan: Obj = {"cutWatches": {"withinSeconds": 20}}
    if args.error_rate:
        plan["errors"] = {"fraction": args.error_rate, "statuses": [500, 503, 429], "retryAfterSeconds": 1}
    if args.hang_rate:
        plan["hang"] = {"fraction": args.hang_rate, "seconds": 3}
    if args.gone_rate:
        plan["goneWatches"] = {"fraction": args.gone_rate}
    return plan


async def kills_part(args: argparse.Namespace) -> int:
    plan = plan_of(args)
    say(f"== kills: {args.jobs} Jobs, {args.kills} SIGKILLs of kadmit run, faults {json.dumps(plan)}")
    with tempfile.TemporaryDirectory(prefix="kadmit-chaos-") as workdir:
        async with chaos_world(seed=args.seed) as world:
            report = await run_chaos(world, Path(workdir), jobs=args.jobs, kills=args.kills, seed=args.seed,
                                     plan=plan, settle_within=args.settle, progress=say)
    say(f"invariant violations:     {len(report.problems)}")
    for problem in report.problems[:20]:
        say(f"  {problem}")
    say(f"kadmit run exits:         {len(report.exits)} (not counting the {report.kills} kills)")
    for exit_ in report.exits[:3]:
        say(f"  {exit_}")
    say(f"Jobs completed:           {report.completed} of {report.jobs}")
    say(f"kills and restarts:       {report.kills}")
    say(f"wall time:                {report.wall:.0f} s")
    say(f"changes checked:          {report.events} events, {report.checks} checks, "
        f"{report.job_starts} Job starts")
    say(f"peak CPU held per queue:  {report.peak_cpu} (limit 5 each, 6 together)")
    say(f"faults injected:          {json.dumps(report.faults)}")
    return len(report.problems) + len(report.exits)


# ---- leadership --------------------------------------------------------------------------------


async def leadership_part(args: argparse.Namespace) -> int:
    say(f"== leadership: {args.leader_trials} trials of skewed clocks (±20 s) and hung Lease renewals")
    logging.getLogger("kadmit").setLevel(logging.ERROR)  # each step-down is a warning: the figures say it
    acting = Acting(LEASE)
    async with chaos_world(seed=args.seed + 1, acting=acting) as world:
        report = await run_leadership(world, acting, trials=args.leader_trials, seed=args.seed, progress=say)
    say(f"moments with two leaders acting: {len(report.two_leaders)}")
    for moment in report.two_leaders[:10]:
        say(f"  {moment}")
    say(f"Lease changed hands:      {report.takeovers} of {report.trials} trials")
    say(f"writes checked:           {report.writes} (Lease requests hung: {report.hung_requests})")
    say(f"invariant violations:     {len(report.problems)}")
    for problem in report.problems[:10]:
        say(f"  {problem}")
    say(f"wall time:                {report.wall:.0f} s")
    return len(report.two_leaders) + len(report.problems)


# ---- partitions --------------------------------------------------------------------------------


async def partitions_part(args: argparse.Namespace) -> int:
    from tests.chaos.partitions import run_partitions
    from tests.checks.multikueue_fixtures import multikueue_env

    say(f"== partitions: {args.partitions} MultiKueue partition-and-heal trials (0.3 to 4 s each)")
    logging.getLogger("kadmit").setLevel(logging.ERROR)  # each lost worker is a warning: the figures say it
    async with multikueue_env({"worker1": 4, "worker2": 4}, worker_lost_timeout=10.0) as env:
        report = await run_partitions(env, trials=args.partitions, seed=args.seed, longest=4.0, progress=say)
    say(f"Jobs started in two clusters: {len(report.twice)} {report.twice or ''}")
    say(f"Jobs lost:                {len(report.lost)} {report.lost or ''}")
    say(f"Jobs completed:           {report.completed} of {report.jobs}")
    say(f"wall time:                {report.wall:.0f} s")
    return len(report.twice) + len(report.lost)


# ---- fuzz --------------------------------------------------------------------------------------

SUFFIXES = ["", "m", "u", "n", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
            "i", "K", "mi"]


def quantities() -> st.SearchStrategy[Any]:
    """Quantity-ish values: well-formed ones of every suffix, exponents far beyond int32, thousands
    of digits, near-misses of the grammar, and values of other JSON types."""
    digits = st.text("0123456789", min_size=1, max_size=30)
    number = st.builds(lambda sign, whole, frac: sign + whole + frac, st.sampled_from(["", "+", "-"]), digits,
                       st.one_of(st.just(""), digits.map(lambda d: "." + d), st.just(".")))
    exponent = st.builds(lambda e, sign, n: f"{e}{sign}{n}", st.sampled_from(["e", "E"]),
                         st.sampled_from(["", "+", "-"]), st.integers(0, 10**15))
    return st.one_of(
        st.builds(lambda n, s: n + s, number, st.sampled_from(SUFFIXES)),
        st.builds(lambda n, e: n + e, number, exponent),
        st.integers(1, 6000).map(lambda n: "9" * n),
        st.integers(1, 6000).map(lambda n: "0." + "0" * n + "1"),
        st.text("0123456789.eEinumkKMGTP+- ", max_size=40),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.none(), st.booleans(), st.lists(st.integers(), max_size=2),
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20) | quantities(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)

WORKLOAD: Obj = {
    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
    "metadata": {"name": "job-sample-1a2b3", "namespace": "default"},
    "spec": {"queueName": "user-queue", "priority": 0, "podSets": [{
        "name": "main", "count": 3,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "1", "memory": "200Mi"}}}]}}}]},
}
QUANTITY_PATHS: dict[str, list[tuple[Any, ...]]] = {
    "Job": [("spec", "template", "spec", "containers", 0, "resources", "requests", r)
            for r in ("cpu", "memory")],
    "Workload": [("spec", "podSets", 0, "template", "spec", "containers", 0, "resources", "requests", r)
                 for r in ("cpu", "memory")],
    "ClusterQueue": [("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, key)
                     for key in ("nominalQuota", "borrowingLimit", "lendingLimit")],
}


def samples() -> dict[str, Obj]:
    """One object of each kind kadmit's webhooks serve, from Kueue's samples."""
    found: dict[str, Obj] = {"Workload": WORKLOAD}
    for path in sorted((HERE.parent / "manifests" / "samples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and "kind" in doc:
                found.setdefault(doc["kind"], doc)
    return found


def paths_and_kinds() -> list[tuple[str, tuple[str, str, str]]]:
    from kadmit.webhook.app import all_webhooks
    from tests.webhook.memview import MemoryView

    return [(hook.path, kind) for hook in all_webhooks(MemoryView()) for kind in sorted(hook.kinds)]


def _replace(obj: Obj, path: tuple[Any, ...], value: Any) -> None:
    """Set ``value`` at ``path`` (keys and list indexes), making or replacing the containers on the way."""
    node: Any = obj
    for step, following in itertools.pairwise(path):
        child = _get(node, step)
        wanted = list if isinstance(following, int) else dict
        if not isinstance(child, wanted):
            child = wanted()
            _set(node, step, child)
        node = child
    _set(node, path[-1], value)


def _get(node: Any, step: Any) -> Any:
    if isinstance(node, list):
        return node[step] if step < len(node) else None
    return node.get(step)


def _set(node: Any, step: Any, value: Any) -> None:
    if isinstance(node, list):
        node.extend([None] * (step + 1 - len(node)))
    node[step] = value


def _subtree_paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(obj, dict):
        for key, value in obj.items():
            found += _subtree_paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            found += _subtree_paths(value, (*prefix, index))
    return found


RAW_BODIES = st.one_of(
    st.binary(max_size=200),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 3000).map(lambda n: b'{"request":' * n + b"1" + b"}" * n),
    st.integers(4300, 6000).map(lambda n: b'{"request": {"uid": "u", "object": ' + b"7" * n + b"}}"),
    st.sampled_from([b'{"request": NaN}', b'{"request": {"uid": Infinity}}', b"-Infinity", b"", b"null",
                     b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', b'{"request": 1}']),
    st.text(max_size=100).map(lambda t: t.encode()),
)


@st.composite
def review_bodies(draw: st.DrawFn, targets: list[tuple[str, tuple[str, str, str]]],
                  objects: dict[str, Obj]) -> tuple[str, bytes, str | None]:
    """(path, body, uid): a review for one of kadmit's webhook paths, fuzzed."""
    path, (group, version, kind) = draw(st.sampled_from(targets))
    if draw(st.integers(0, 9)) == 0:
        return path, draw(RAW_BODIES), None
    obj = json.loads(json.dumps(objects.get(kind) or {"apiVersion": f"{group}/{version}", "kind": kind}))
    for _ in range(draw(st.integers(0, 3))):
        quantity_paths = QUANTITY_PATHS.get(kind, [])
        if quantity_paths and draw(st.booleans()):
            _replace(obj, draw(st.sampled_from(quantity_paths)), draw(quantities()))
        else:
            subtrees = _subtree_paths(obj)
            if subtrees:
                _replace(obj, draw(st.sampled_from(subtrees)), draw(json_values))
    # One review in four has a broken envelope (uid, kind, operation, a field of the wrong type);
    # the others reach the handlers with their fuzzed objects.
    broken = draw(st.integers(0, 3)) == 0
    uid: Any = draw(st.one_of(st.just(""), st.none(), st.integers())) if broken and draw(st.booleans()) \
        else draw(st.uuids()).hex
    operations = ["CREATE", "UPDATE", "DELETE", "CONNECT", "create", ""] if broken else ["CREATE", "UPDATE"]
    operation = draw(st.sampled_from(operations))
    old = obj if operation == "UPDATE" and draw(st.booleans()) else None
    if old is None and operation == "UPDATE":
        old = json.loads(json.dumps(objects.get(kind) or {}))
        if draw(st.booleans()) and (subtrees := _subtree_paths(old)):
            _replace(old, draw(st.sampled_from(subtrees)), draw(json_values))
    request: Obj = {
        "uid": uid,
        "kind": {"group": group, "version": version,
                 "kind": draw(st.sampled_from([kind, "Pod", ""])) if broken else kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "operation": operation,
        "namespace": draw(st.sampled_from(["default", "", "kube-system", "x" * 300])),
        "name": (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None,
        "userInfo": {"username": draw(st.sampled_from(["alice", "system:serviceaccount:kadmit-system:"
                                                                "kadmit-controller-manager", ""]))},
        "object": obj,
        "oldObject": old,
        "dryRun": draw(st.booleans()),
    }
    if broken:
        for key in draw(st.lists(st.sampled_from(sorted(request)), max_size=2)):
            request[key] = draw(json_values)  # a field of the wrong type, or gone
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    body = json.dumps(review, allow_nan=False).encode()
    uid = request.get("uid")  # as sent: a broken envelope may have replaced it
    return path, body, uid if isinstance(uid, str) else None


def judge(status: int, body: bytes, uid: str | None) -> str | None:
    """None when the answer is acceptable: a valid AdmissionReview for this uid, or a clear 4xx."""
    if 400 <= status <= 499:
        return None if body.strip() else f"{status} without a message"
    if status != 200:
        return f"HTTP {status}: {body[:200]!r}"
    try:
        answer = json.loads(body)
        response = answer["response"]
        if answer.get("kind") != "AdmissionReview" or not isinstance(response.get("allowed"), bool):
            return f"not an AdmissionReview answer: {body[:200]!r}"
        if uid is not None and response.get("uid") != uid:
            return f"answer for uid {response.get('uid')!r}, asked {uid!r}"
        if "patch" in response and (response.get("patchType") != "JSONPatch" or not isinstance(
                json.loads(base64.b64decode(response["patch"])), list)):
            return f"a patch that is no JSONPatch: {body[:200]!r}"
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"unreadable 200 ({exc}): {body[:200]!r}"
    return None


class Target:
    """One keep-alive HTTPS connection to the webhook server, made again when it is cut."""

    def __init__(self, port: int, ca: bytes) -> None:
        self.port = port
        self.context = ssl.create_default_context(cadata=ca.decode())
        self.context.check_hostname = False  # the certificate names the Service, we dial 127.0.0.1
        self.connection: http.client.HTTPSConnection | None = None

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.connection is None:
            self.connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context,
                                                          timeout=10)
        try:
            self.connection.request("POST", path, body, {"Content-Type": "application/json"})
            response = self.connection.getresponse()
            data = response.read()
            if response.will_close:
                self.close()
            return response.status, data
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def start_webhook(certs: Path, log: Path) -> tuple[subprocess.Popen[str], int]:
    with log.open("w") as stderr:
        process = subprocess.Popen([sys.executable, __file__, "--serve-webhook", str(certs)],
                                   stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("port "):
        process.kill()
        raise SystemExit(f"chaos.py: error: the webhook server did not start: {line!r}")
    return process, int(line.split()[1])


async def serve_webhook(certs: Path) -> None:
    from kadmit.webhook.app import create_webhook_app
    from kadmit.webhook.metrics import WebhookMetrics
    from kadmit.webhook.server import WebhookServer
    from kadmit.webhook.tls import ServingTLS
    from tests.webhook.memview import MemoryView

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    tls = ServingTLS()
    tls.load((certs / "tls.crt").read_bytes(), (certs / "tls.key").read_bytes())
    view = MemoryView(local_queues={("default", "user-queue"): "cluster-queue"},
                      priority_classes={"sample-priority"})
    app = create_webhook_app(view, metrics=WebhookMetrics())
    async with WebhookServer(app, tls.context, host="127.0.0.1", port=0) as server:
        print(f"port {server.port}", flush=True)
        await asyncio.Event().wait()


def fuzz_reviews(count: int, seed: int) -> dict[str, Any]:
    """``count`` fuzzed reviews against a fresh webhook server; what came back."""
    from kadmit.certs.authority import issue_ca, issue_serving

    targets, objects = paths_and_kinds(), samples()
    ca = issue_ca()
    pair = issue_serving(ca, SERVICE, NAMESPACE)
    latencies: list[float] = []
    crashes: list[str] = []
    outcomes: Counter[str] = Counter()
    slowest: tuple[float, str] = (0.0, "")
    sent = 0
    with tempfile.TemporaryDirectory(prefix="kadmit-fuzz-") as directory:
        certs = Path(directory)
        (certs / "tls.crt").write_bytes(pair.cert_pem)
        (certs / "tls.key").write_bytes(pair.key_pem)
        log = certs / "webhook.log"
        server, port = start_webhook(certs, log)
        target = Target(port, ca.cert_pem)

        @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), derandomize=False)
        @given(review_bodies(targets, objects))
        def one(case: tuple[str, bytes, str | None]) -> None:
            nonlocal slowest, sent
            path, body, uid = case
            sent += 1
            started = time.perf_counter()
            try:
                status, answer = target.post(path, body)
            except (OSError, http.client.HTTPException) as exc:
                crashes.append(f"{path}: no answer ({exc!r}) to {body[:150]!r}")
                return
            elapsed = (time.perf_counter() - started) * 1000
            latencies.append(elapsed)
            if elapsed > slowest[0]:
                slowest = (elapsed, f"{path} {len(body)} bytes")
            outcomes[f"{status}"] += 1
            problem = judge(status, answer, uid)
            if problem is not None:
                crashes.append(f"{path}: {problem}")
            if server.poll() is not None:
                crashes.append(f"the webhook server died (exit {server.returncode})")
                raise SystemExit("chaos.py: error: the webhook server died")

        random.seed(seed)
        try:
            one()
        finally:
            target.close()
            alive = server.poll() is None
            server.send_signal(signal.SIGTERM)
            server.wait(10)
        logged = log.read_text(errors="replace").splitlines()
    levels = Counter(line.split(" ", 1)[0] for line in logged
                     if line.split(" ", 1)[0] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
    tracebacks = sum(1 for line in logged if line.startswith("Traceback"))
    if tracebacks or levels["ERROR"] or levels["CRITICAL"]:
        crashes.append(f"the webhook server logged {levels['ERROR'] + levels['CRITICAL']} errors and "
                       f"{tracebacks} tracebacks")
    return {"sent": sent, "crashes": crashes, "outcomes": outcomes, "alive": alive,
            "latencies": latencies, "slowest": slowest, "logged": levels}


def fuzz_quantities(count: int) -> dict[str, Any]:
    """``count`` fuzzed quantities through kadmit's parser: each a value or a QuantityError."""
    from kadmit.engine.quantity import QuantityError, parse_exact

    crashes: list[str] = []
    outcomes: Counter[str] = Counter()
    slowest: tuple[float, str] = (0.0, "")

    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(quantities())
    def one(value: Any) -> None:
        nonlocal slowest
        started = time.perf_counter()
        try:
            parse_exact(value)
            outcomes["parsed"] += 1
        except QuantityError:
            outcomes["refused"] += 1
        except Exception as exc:
            crashes.append(f"{value!r:.80}: {exc!r}")
        elapsed = (time.perf_counter() - started) * 1000
        if elapsed > slowest[0]:
            slowest = (elapsed, repr(value)[:60])

    one()
    return {"crashes": crashes, "outcomes": outcomes, "slowest": slowest}


def fuzz_part(args: argparse.Namespace) -> int:
    say(f"== fuzz: {args.fuzz} AdmissionReviews over TLS to kadmit's webhook, {args.fuzz} quantities")
    started = time.monotonic()
    reviews = fuzz_reviews(args.fuzz, args.seed)
    latencies = sorted(reviews["latencies"]) or [0.0]
    slow = sum(1 for ms in latencies if ms > SLOW_MS)
    say(f"reviews sent:             {reviews['sent']} ({time.monotonic() - started:.0f} s)")
    say(f"crashes:                  {len(reviews['crashes'])} (5xx, invalid answers, cut connections; "
        f"server alive at the end: {reviews['alive']})")
    for crash in reviews["crashes"][:10]:
        say(f"  {crash}")
    say(f"answers by status:        {dict(sorted(reviews['outcomes'].items()))}; server log lines by "
        f"level: {dict(reviews['logged'])}")
    say(f"latency:                  p50 {statistics.median(latencies):.2f} ms, "
        f"p99 {latencies[int(len(latencies) * 0.99) - 1]:.2f} ms, slowest {reviews['slowest'][0]:.1f} ms "
        f"({reviews['slowest'][1]}); over {SLOW_MS:.0f} ms: {slow}")
    parsed = fuzz_quantities(args.fuzz)
    say(f"quantities parsed:        {dict(parsed['outcomes'])}, crashes {len(parsed['crashes'])}, "
        f"slowest {parsed['slowest'][0]:.2f} ms ({parsed['slowest'][1]})")
    for crash in parsed["crashes"][:10]:
        say(f"  {crash}")
    return len(reviews["crashes"]) + len(parsed["crashes"]) + (0 if reviews["alive"] else 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=500, help="Jobs in the kills part (default 500)")
    parser.add_argument("--kills", type=int, default=100, help="SIGKILLs of kadmit run (default 100)")
    parser.add_argument("--error-rate", type=float, default=0.05, help="requests answered 500/503/429 (0.05)")
    parser.add_argument("--hang-rate", type=float, default=0.02, help="requests hung, then cut (0.02)")
    parser.add_argument("--gone-rate", type=float, default=0.1, help="watches answered 410 (0.1)")
    parser.add_argument("--faults", metavar="FILE", help="a fault plan instead of the three rates")
    parser.add_argument("--leader-trials", type=int, default=50, help="leadership trials (default 50)")
    parser.add_argument("--partitions", type=int, default=20, help="MultiKueue partition trials (20)")
    parser.add_argument("--fuzz", type=int, default=10_000, help="fuzzed reviews and quantities (10000)")
    parser.add_argument("--parts", default="kills,leadership,partitions,fuzz",
                        help="which parts, comma-separated")
    parser.add_argument("--settle", type=float, default=300.0, help="seconds the end may take to settle")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true",
                        help="60 Jobs, 10 kills, 10 trials, 5 partitions, 1000 reviews")
    parser.add_argument("--serve-webhook", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_webhook:
        asyncio.run(serve_webhook(args.serve_webhook))
        return
    if args.quick:
        args.jobs, args.kills, args.leader_trials, args.partitions, args.fuzz = 60, 10, 10, 5, 1000
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - {"kills", "leadership", "partitions", "fuzz"})
    if unknown:
        parser.error(f"unknown part {unknown[0]!r}: kills, leadership, partitions, fuzz")
    say(f"bench/chaos.py on {socket.gethostname()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
        f"seed {args.seed}")
    failures = 0
    if "kills" in parts:
        failures += asyncio.run(kills_part(args))
    if "leadership" in parts:
        failures += asyncio.run(leadership_part(args))
    if "partitions" in parts:
        failures += asyncio.run(partitions_part(args))
    if "fuzz" in parts:
        failures += fuzz_part(args)
    say(f"== {'FAILED' if failures else 'ok'}: {failures} violations, exits and crashes in all")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
