"""Fault injection for reliability tests: the API server misbehaving the ways real ones do.

A :class:`FaultInjector` is an aiohttp middleware placed in front of the local API server
(``LocalCluster(middlewares=[injector.middleware])``). Every knob is off until set, and every
knob is bounded, by a number of requests or a duration, so a test that forgets to turn a
fault off cannot hang the suite. With a seed, which requests fail is reproducible.

- :meth:`FaultInjector.fail`: answer a fraction of requests with 500, 503 or 429 (429 and 503
  carry ``Retry-After``), as an overloaded or restarting server does.
- :meth:`FaultInjector.delay`: add latency before each request is handled.
- :meth:`FaultInjector.force_gone`: the next *n* watches get what a server whose history was
  compacted sends: HTTP 200 and one ``ERROR`` event holding a ``410 Expired`` Status.
- :meth:`FaultInjector.drop_watches`: cut every open watch connection mid-stream.
- :meth:`FaultInjector.pause`: make the server unreachable: requests hang (``mode="hang"``)
  or have their connection cut (``mode="refuse"``) until :meth:`resume` or the time runs out.
- :meth:`FaultInjector.hang`: a fraction of requests is held, never handled, and its connection
  cut after a while: a stuck connection, a partitioned node. Nothing of it is committed.
- :meth:`FaultInjector.lose_reply`: a fraction of writes is committed and then its answer is
  lost: the connection is reset (``mode="reset"``) or a 500 comes back (``mode="500"``).
- :meth:`FaultInjector.cut_watches`: each watch is cut at a random moment within a time, and
  :meth:`FaultInjector.gone_watches` answers a fraction of watches with ``410 Expired``.

``fail``, ``delay``, ``hang`` and ``lose_reply`` take ``verbs`` (Kubernetes' verbs: get, list,
watch, create, update, patch, delete, deletecollection) and ``resources`` (``jobs``,
``workloads/status``, ``workloads.kueue.x-k8s.io``, ``leases``...) to limit them to some
requests. :func:`load_plan` reads all of this from a YAML file (``python -m kadmit.localcluster
--faults FILE``, ``kadmit local --faults FILE``), where the bound is the life of the process.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from aiohttp import web

from kadmit.localcluster import errors
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.server import true

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PauseMode = Literal["hang", "refuse"]
LostReplyMode = Literal["reset", "500"]

MAX_COUNT = 100_000
MAX_SECONDS = 600.0
MAX_LATENCY_SECONDS = 30.0
_FAIL_STATUSES = {
    500: ("InternalError", "Internal error occurred: injected by localcluster faults"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request (injected)"),
    429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
}
VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"})
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass
class _Budget:
    """How long a knob stays on: a number of uses, a deadline on the loop clock, or both."""

    remaining: int | None
    until: float | None

    def live(self, now: float) -> bool:
        if self.until is not None and now >= self.until:
            return False
        return self.remaining is None or self.remaining > 0

    def spend(self) -> None:
        if self.remaining is not None:
            self.remaining -= 1


def _budget(for_requests: int | None, for_seconds: float | None, until_stopped: bool = False) -> _Budget:
    if for_requests is None and for_seconds is None and not until_stopped:
        raise ValueError("a fault needs a bound: give for_requests or for_seconds")
    if for_requests is not None and not 0 < for_requests <= MAX_COUNT:
        raise ValueError(f"for_requests must be between 1 and {MAX_COUNT}")
    if for_seconds is not None and not 0 < for_seconds <= MAX_SECONDS:
        raise ValueError(f"for_seconds must be between 0 and {MAX_SECONDS}")
    until = None if for_seconds is None else asyncio.get_running_loop().time() + for_seconds
    return _Budget(for_requests, until)


class FaultCounts:
    """What was injected so far, for tests to assert on: requests failed, delayed, answered 410,
    paused, hung; writes whose answer was lost after they were committed; watches dropped or cut;
    failures by HTTP status."""

    def __init__(self) -> None:
        self.failed = self.delayed = self.gone = self.dropped = self.paused = 0
        self.hung = self.lost_replies = self.cut = 0
        self.by_status: dict[int, int] = {}

    def as_dict(self) -> dict[str, Any]:
        return {"failed": self.failed, "delayed": self.delayed, "gone": self.gone, "dropped": self.dropped,
                "paused": self.paused, "hung": self.hung, "lostReplies": self.lost_replies, "cut": self.cut,
                "byStatus": dict(sorted(self.by_status.items()))}


def is_watch(request: web.Request) -> bool:
    return true(request.query.get("watch")) or "/watch/" in request.path


def classify(request: web.Request) -> tuple[str, str, str]:
    """The request's verb, resource (``plural`` or ``plural/subresource``) and API group, as RBAC
    names them; the resource is empty for paths that name none (``/version``, discovery)."""
    parts = [p for p in request.path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return request.method.lower(), "", ""
    if rest[:1] == ["watch"]:
        rest = rest[1:]
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        rest = rest[2:]
    resource = "/".join(rest[:1] + rest[2:3])
    named = len(rest) >= 2
    method = request.method
    if method == "GET":
        verb = "watch" if is_watch(request) else "get" if named else "list"
    elif method == "DELETE":
        verb = "delete" if named else "deletecollection"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
    return verb, resource, group


@dataclass(frozen=True)
class Match:
    """Which requests a knob applies to: every one unless ``verbs`` or ``resources`` narrow it.
    A resource is ``plural``, ``plural/subresource``, or either qualified by its group
    (``workloads.kueue.x-k8s.io``, ``workloads.kueue.x-k8s.io/status``)."""

    verbs: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()

    @classmethod
    def of(cls, verbs: Iterable[str] | None = None, resources: Iterable[str] | None = None) -> Match:
        verb_set = frozenset(v.lower() for v in verbs or ())
        unknown = sorted(verb_set - VERBS)
        if unknown:
            raise ValueError(f"unknown verb {unknown[0]!r}; verbs are {', '.join(sorted(VERBS))}")
        resource_set = frozenset(resources or ())
        if any(not r or r.count("/") > 1 or r.startswith("/") or r.endswith("/") for r in resource_set):
            raise ValueError("a resource is 'plural', 'plural/subresource' or 'plural.group[/subresource]'")
        return cls(verb_set, resource_set)

    def __call__(self, request: web.Request) -> bool:
        if not self.verbs and not self.resources:
            return True
        verb, resource, group = classify(request)
        if self.verbs and verb not in self.verbs:
            return False
        if not self.resources:
            return True
        if not resource:
            return False
        plural, _, sub = resource.partition("/")
        qualified = f"{plural}.{group}" + (f"/{sub}" if sub else "") if group else resource
        return resource in self.resources or qualified in self.resources


@dataclass
class _Rule:
    """One knob as set: whom it applies to, how often, for how long, and its own values."""

    match: Match
    fraction: float
    budget: _Budget
    values: dict[str, Any] = field(default_factory=dict)

    def fires(self, request: web.Request, now: float, rng: random.Random) -> bool | None:
        """True: inject; False: not this request; None: the knob has run out (turn it off)."""
        if not self.budget.live(now):
            return None
        if not self.match(request) or (self.fraction < 1 and rng.random() >= self.fraction):
            return False
        self.budget.spend()
        return True


def _fraction(fraction: float) -> float:
    if not 0 < fraction <= 1:
        raise ValueError("fraction must be in (0, 1]")
    return fraction


class FaultInjector:
    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)
        self._fail: _Rule | None = None
        self._latency: _Rule | None = None
        self._hang: _Rule | None = None
        self._lose: _Rule | None = None
        self._gone = 0
        self._gone_fraction = 0.0
        self._cut_within = 0.0
        self._drop_every = 0.0
        self._next_drop: float | None = None
        self._active_from: float | None = 0.0
        self._start_delay = 0.0
        self._pause: tuple[PauseMode, float] | None = None
        self._resumed = asyncio.Event()
        self._watches: set[asyncio.Transport] = set()
        self.counts = FaultCounts()

    # ---- knobs -------------------------------------------------------------------------

    def fail(
        self,
        fraction: float,
        status: int | Collection[int] = 500,
        *,
        for_requests: int | None = None,
        for_seconds: float | None = None,
        retry_after: int = 1,
        verbs: Iterable[str] | None = None,
        resources: Iterable[str] | None = None,
        until_stopped: bool = False,
    ) -> None:
        """Answer ``fraction`` of requests with ``status`` (500, 503 or 429; several: one of them
        at random each time) within the bound."""
        statuses = (status,) if isinstance(status, int) else tuple(status)
        if not statuses or any(s not in _FAIL_STATUSES for s in statuses):
            raise ValueError(f"status must be one of {sorted(_FAIL_STATUSES)}")
        if not 0 <= retry_after <= 60:
            raise ValueError("retry_after must be between 0 and 60 seconds")
        self._fail = _Rule(Match.of(verbs, resources), _fraction(fraction),
                           _budget(for_requests, for_seconds, until_stopped),
                           {"statuses": statuses, "retry_after": retry_after})

    def delay(
        self, seconds: float, *, for_requests: int | None = None, for_seconds: float | None = None,
        fraction: float = 1.0, verbs: Iterable[str] | None = None, resources: Iterable[str] | None = None,
        until_stopped: bool = False,
    ) -> None:
        """Hold ``fraction`` of requests ``seconds`` before handling them, within the bound."""
        if not 0 < seconds <= MAX_LATENCY_SECONDS:
            raise ValueError(f"latency must be in (0, {MAX_LATENCY_SECONDS}] seconds")
        self._latency = _Rule(Match.of(verbs, resources), _fraction(fraction),
                              _budget(for_requests, for_seconds, until_stopped), {"seconds": seconds})

    def hang(
        self, fraction: float, seconds: float, *, for_requests: int | None = None,
        for_seconds: float | None = None, verbs: Iterable[str] | None = None,
        resources: Iterable[str] | None = None, until_stopped: bool = False,
    ) -> None:
        """Hold ``fraction`` of requests ``seconds`` without handling them, then cut their
        connection: the client sees no answer (its deadline, or a reset), nothing is committed."""
        if not 0 < seconds <= MAX_SECONDS:
            raise ValueError(f"seconds must be in (0, {MAX_SECONDS}]")
        self._hang = _Rule(Match.of(verbs, resources), _fraction(fraction),
                           _budget(for_requests, for_seconds, until_stopped), {"seconds": seconds})

    def lose_reply(
        self, fraction: float, mode: LostReplyMode = "reset", *, for_requests: int | None = None,
        for_seconds: float | None = None, verbs: Iterable[str] | None = None,
        resources: Iterable[str] | None = None, until_stopped: bool = False,
    ) -> None:
        """Commit ``fraction`` of writes, then lose the answer: reset the connection
        (``mode="reset"``: the client sees no answer) or answer ``500 InternalError``
        (``mode="500"``) although the write is stored. Only successful writes are touched."""
        if mode not in ("reset", "500"):
            raise ValueError("mode must be 'reset' or '500'")
        match = Match.of(verbs or WRITE_VERBS, resources)
        if match.verbs - WRITE_VERBS:
            raise ValueError(f"a lost reply needs a write: verbs are {', '.join(sorted(WRITE_VERBS))}")
        self._lose = _Rule(match, _fraction(fraction), _budget(for_requests, for_seconds, until_stopped),
                           {"mode": mode})

    def force_gone(self, watches: int = 1) -> None:
        """The next ``watches`` watch requests are told their resourceVersion is too old."""
        if not 0 < watches <= MAX_COUNT:
            raise ValueError(f"watches must be between 1 and {MAX_COUNT}")
        self._gone = watches

    def gone_watches(self, fraction: float) -> None:
        """Answer ``fraction`` of watch requests with ``410 Expired`` until :meth:`clear`."""
        self._gone_fraction = _fraction(fraction)

    def cut_watches(self, within: float) -> None:
        """Cut each watch opened from now on at a random moment within ``within`` seconds
        (until :meth:`clear`): the stream breaks mid-way, as a load balancer or a restart breaks it."""
        if not 0 < within <= MAX_SECONDS:
            raise ValueError(f"within must be in (0, {MAX_SECONDS}] seconds")
        self._cut_within = within

    def drop_watches_every(self, seconds: float) -> None:
        """Call :meth:`drop_watches` every ``seconds`` (at the first request after each period)."""
        if not 0 < seconds <= MAX_SECONDS:
            raise ValueError(f"seconds must be in (0, {MAX_SECONDS}]")
        self._drop_every = seconds
        now = _loop_time()
        self._next_drop = None if now is None else now + seconds

    def start_after(self, seconds: float) -> None:
        """Inject nothing for ``seconds`` from now (requests pass untouched meanwhile)."""
        if not 0 <= seconds <= MAX_SECONDS:
            raise ValueError(f"seconds must be in [0, {MAX_SECONDS}]")
        now = _loop_time()
        self._active_from = None if now is None else now + seconds
        self._start_delay = seconds

    def drop_watches(self) -> int:
        """Cut every open watch connection, as a load balancer or a restart does; return how many."""
        dropped = 0
        for transport in list(self._watches):
            if not transport.is_closing():
                transport.abort()
                dropped += 1
        self._watches.clear()
        self.counts.dropped += dropped
        return dropped

    def pause(self, seconds: float, mode: PauseMode = "hang") -> None:
        """Make the API unreachable for ``seconds`` (or until :meth:`resume`); open watches are cut."""
        if not 0 < seconds <= MAX_SECONDS:
            raise ValueError(f"seconds must be in (0, {MAX_SECONDS}]")
        if mode not in ("hang", "refuse"):
            raise ValueError("mode must be 'hang' or 'refuse'")
        self._resumed.clear()
        self._pause = (mode, asyncio.get_running_loop().time() + seconds)
        self.drop_watches()

    def resume(self) -> None:
        self._pause = None
        self._resumed.set()

    def clear(self) -> None:
        """Turn every knob off."""
        self._fail = self._latency = self._hang = self._lose = None
        self._gone = 0
        self._gone_fraction = self._cut_within = self._drop_every = 0.0
        self._next_drop = None
        self._active_from, self._start_delay = 0.0, 0.0
        self.resume()

    def apply(self, plan: FaultPlan) -> None:
        """Set the knobs a plan (:func:`load_plan`) names, for as long as the server runs."""
        if plan.seed is not None:
            self._random.seed(plan.seed)
        for knob, arguments in plan.knobs:
            getattr(self, knob)(**arguments)

    # ---- the middleware ----------------------------------------------------------------

    async def _wait_out_pause(self, request: web.Request) -> bool:
        """Apply a pause; return False when the request must be dropped without an answer."""
        if self._pause is None:
            return True
        mode, until = self._pause
        remaining = until - asyncio.get_running_loop().time()
        if remaining <= 0:
            self.resume()
            return True
        self.counts.paused += 1
        if mode == "refuse":
            return False
        try:
            await asyncio.wait_for(self._resumed.wait(), remaining)
        except TimeoutError:
            self.resume()
        return True

    def _fires(self, name: str, request: web.Request, now: float) -> _Rule | None:
        rule: _Rule | None = getattr(self, name)
        if rule is None:
            return None
        fired = rule.fires(request, now, self._random)
        if fired is None:
            setattr(self, name, None)
        return rule if fired else None

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not await self._wait_out_pause(request):
            return _cut(request)
        now = asyncio.get_running_loop().time()
        if self._active_from is None:  # set before the loop ran (a plan): from the first request
            self._active_from = now + self._start_delay
        if now < self._active_from:
            return await handler(request)
        if self._drop_every and self._next_drop is None:
            self._next_drop = now + self._drop_every
        elif self._drop_every and self._next_drop is not None and now >= self._next_drop:
            self._next_drop = now + self._drop_every
            self.drop_watches()
        if (rule := self._fires("_latency", request, now)) is not None:
            self.counts.delayed += 1
            await asyncio.sleep(rule.values["seconds"])
        if (rule := self._fires("_hang", request, now)) is not None:
            self.counts.hung += 1
            await asyncio.sleep(rule.values["seconds"])
            return _cut(request)
        if (rule := self._fires("_fail", request, now)) is not None:
            status = self._random.choice(rule.values["statuses"])
            return self._failure(status, rule.values["retry_after"])
        if is_watch(request):
            if self._gone > 0 or (self._gone_fraction and self._random.random() < self._gone_fraction):
                self._gone = max(self._gone - 1, 0)
                self.counts.gone += 1
                return await self._gone_stream(request)
            return await self._tracked_watch(request, handler)
        lose = self._lose if self._lose is not None and self._lose.match(request) else None
        response = await handler(request)
        if lose is None or not 200 <= response.status <= 299 or self._fires("_lose", request, now) is None:
            return response
        self.counts.lost_replies += 1
        if lose.values["mode"] == "reset":
            return _cut(request)
        return self._failure(500, 0)

    def _failure(self, status: int, retry_after: int) -> web.Response:
        reason, message = _FAIL_STATUSES[status]
        self.counts.failed += 1
        self.counts.by_status[status] = self.counts.by_status.get(status, 0) + 1
        headers: dict[str, str] = {}
        details: Obj | None = None
        if status in (429, 503):
            headers["Retry-After"] = str(retry_after)
            details = {"retryAfterSeconds": retry_after}
        return web.Response(
            status=status, text=json.dumps(errors.status(status, reason, message, details)),
            content_type="application/json", headers=headers,
        )

    async def _gone_stream(self, request: web.Request) -> web.StreamResponse:
        version = request.query.get("resourceVersion", "0")
        event = {
            "type": "ERROR",
            "object": errors.gone(f"too old resource version: {version} (injected)").status,
        }
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(json.dumps(event).encode() + b"\n")
        await response.write_eof()
        return response

    async def _tracked_watch(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        timer: asyncio.TimerHandle | None = None
        if transport is not None:
            self._watches.add(transport)
            if self._cut_within:
                timer = asyncio.get_running_loop().call_later(
                    self._random.uniform(0, self._cut_within), self._cut_watch, transport)
        try:
            return await handler(request)
        finally:
            if timer is not None:
                timer.cancel()
            if transport is not None:
                self._watches.discard(transport)

    def _cut_watch(self, transport: asyncio.Transport) -> None:
        if not transport.is_closing():
            transport.abort()
            self.counts.cut += 1


def _loop_time() -> float | None:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return None


def _cut(request: web.Request) -> web.Response:
    """Drop the connection without an answer (aiohttp discards whatever is returned)."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=503)


# ---- plans: the knobs as a YAML file ---------------------------------------------------


class FaultPlanError(ValueError):
    """A fault plan that cannot be used; the message is one line naming the key."""


@dataclass(frozen=True)
class FaultPlan:
    """Knob calls to make once the server runs: ``(method name, keyword arguments)``."""

    seed: int | None
    knobs: tuple[tuple[str, dict[str, Any]], ...]


_MATCH_KEYS = {"verbs": "verbs", "resources": "resources"}
_PLAN_KEYS: dict[str, tuple[str, dict[str, str], set[str]]] = {
    # plan key: (knob, {YAML key: keyword argument}, required YAML keys)
    "errors": ("fail", {"fraction": "fraction", "statuses": "status", "retryAfterSeconds": "retry_after",
                        **_MATCH_KEYS}, {"fraction"}),
    "latency": ("delay", {"seconds": "seconds", "fraction": "fraction", **_MATCH_KEYS}, {"seconds"}),
    "hang": ("hang", {"fraction": "fraction", "seconds": "seconds", **_MATCH_KEYS}, {"fraction", "seconds"}),
    "loseReply": ("lose_reply", {"fraction": "fraction", "mode": "mode", **_MATCH_KEYS}, {"fraction"}),
    "goneWatches": ("gone_watches", {"fraction": "fraction"}, {"fraction"}),
    "cutWatches": ("cut_watches", {"withinSeconds": "within"}, {"withinSeconds"}),
    "dropWatches": ("drop_watches_every", {"everySeconds": "seconds"}, {"everySeconds"}),
}
_BOUNDED = {"fail", "delay", "hang", "lose_reply"}
_ORDER = ["startAfterSeconds", "seed", *_PLAN_KEYS]


def parse_plan(document: Any) -> FaultPlan:
    """A plan from its YAML document (see :func:`load_plan`); :class:`FaultPlanError` if unusable."""
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise FaultPlanError("a fault plan is a mapping of knobs (errors, latency, hang, ...)")
    unknown = sorted(set(document) - set(_ORDER))
    if unknown:
        raise FaultPlanError(f"unknown key {unknown[0]!r}; known: {', '.join(_ORDER)}")
    seed = document.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise FaultPlanError("seed must be an integer")
    knobs: list[tuple[str, dict[str, Any]]] = []
    if "startAfterSeconds" in document:
        delay = _number(document["startAfterSeconds"], "startAfterSeconds")
        knobs.append(("start_after", {"seconds": delay}))
    for key, (knob, names, required) in _PLAN_KEYS.items():
        if key not in document:
            continue
        values = document[key]
        if not isinstance(values, dict):
            raise FaultPlanError(f"{key} must be a mapping")
        extra = sorted(set(values) - set(names))
        if extra:
            raise FaultPlanError(f"{key}: unknown key {extra[0]!r}; known: {', '.join(names)}")
        missing = sorted(required - set(values))
        if missing:
            raise FaultPlanError(f"{key}: {missing[0]} is required")
        arguments: dict[str, Any] = {}
        for name, value in values.items():
            if name in ("verbs", "resources", "statuses"):
                items = [value] if isinstance(value, str | int) and not isinstance(value, bool) else value
                if not isinstance(items, list) or not items:
                    raise FaultPlanError(f"{key}.{name} must be a non-empty list")
                arguments[names[name]] = items
            elif name == "mode":
                arguments["mode"] = str(value)
            elif name == "retryAfterSeconds":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise FaultPlanError(f"{key}.{name} must be a whole number of seconds")
                arguments["retry_after"] = value
            else:
                arguments[names[name]] = _number(value, f"{key}.{name}")
        if knob in _BOUNDED:
            arguments["until_stopped"] = True
        knobs.append((knob, arguments))
    plan = FaultPlan(seed, tuple(knobs))
    _check(plan)
    return plan


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FaultPlanError(f"{where} must be a number")
    return float(value)


def _check(plan: FaultPlan) -> None:
    """Try every knob on a scratch injector, so a bad value is an error before the server starts."""
    scratch = FaultInjector()
    for knob, arguments in plan.knobs:
        try:
            getattr(scratch, knob)(**arguments)
        except ValueError as exc:
            key = next((k for k, (name, _, _) in _PLAN_KEYS.items() if name == knob), "startAfterSeconds")
            raise FaultPlanError(f"{key}: {exc}") from None


def load_plan(path: str | Path) -> FaultPlan:
    """Read a fault plan: a YAML mapping, every key optional, for example::

        seed: 7
        startAfterSeconds: 5          # nothing injected while clients set up
        errors: {fraction: 0.05, statuses: [500, 503, 429], retryAfterSeconds: 1}
        latency: {seconds: 0.02, fraction: 0.5}
        hang: {fraction: 0.01, seconds: 20, verbs: [update], resources: [leases]}
        loseReply: {fraction: 0.05, mode: reset, resources: [workloads/status]}
        goneWatches: {fraction: 0.1}
        cutWatches: {withinSeconds: 30}
        dropWatches: {everySeconds: 60}

    :class:`FaultPlanError` (one line) when the file cannot be read or a value is wrong.
    """
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise FaultPlanError(f"cannot read it: {exc.strerror or exc}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FaultPlanError(f"not YAML: {str(exc).splitlines()[0]}") from None
    return parse_plan(document)
