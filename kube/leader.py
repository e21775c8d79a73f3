"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does it.

The leader renews the Lease every ``retry_period``; every write is conditional on the
resourceVersion read, so two candidates can never both believe they hold it. Each attempt is
bounded: a leader that has not renewed for ``renew_deadline`` steps down on its own (its
``on_stopped_leading`` stops its writers) before its Lease can expire and be taken.

Expiry is judged as client-go judges it: by the observer's own monotonic clock, from the moment
it last saw the Lease *change*, never by comparing another replica's ``renewTime`` with the local
wall clock. So clock skew between replicas can neither delay a takeover nor steal a healthy
leader's Lease. A follower takes a Lease it has seen unchanged for ``leaseDurationSeconds``; a
leader that stops cleanly empties the holder so a follower takes over at its next try. The
renewals are timed: a Lease has no event for "expired".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kadmit.kube.client import Client
from kadmit.kube.errors import ApiError
from kadmit.kube.objects import Obj
from kadmit.kube.resources import LEASES, Resource
from kadmit.kube.timestamps import format_micro_time

logger = logging.getLogger(__name__)

Callback = Callable[[], Awaitable[None]]


def default_identity() -> str:
    """A candidate's name when none is given: the host's, made unique as client-go's callers do."""
    return f"{socket.gethostname()}_{secrets.token_hex(4)}"


@dataclass(frozen=True)
class LeaseTiming:
    """client-go's leader-election timing: a Lease holds for ``lease_duration``; the leader steps
    down after ``renew_deadline`` without renewing; candidates try every ``retry_period``."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("need retry_period < renew_deadline < lease_duration")


DEFAULT_TIMING = LeaseTiming()


class LeaderElector:
    def __init__(
        self,
        client: Client,
        namespace: str,
        name: str,
        identity: str,
        *,
        timing: LeaseTiming = DEFAULT_TIMING,
        on_started_leading: Callback,
        on_stopped_leading: Callback,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock`` stamps the Lease (wall time, for people reading it); ``monotonic`` judges expiry."""
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timing = timing
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.clock = clock
        self.monotonic = monotonic
        self.leading = False
        self._last_renew = 0.0  # monotonic time of our last successful renewal
        self._observed: tuple[Any, ...] | None = None  # the Lease's holder and renewal, as last seen
        self._observed_at = 0.0  # monotonic time it was first seen like that
        self.transitions_seen = 0

    async def run(self) -> None:
        try:
            while True:
                held = await self._bounded_try()
                now = self.monotonic()
                if held:
                    self._last_renew = now
                    if not self.leading:
                        self.leading = True
                        logger.info("%s became the leader (Lease %s/%s)", self.identity, self.namespace,
                                    self.name)
                        await self.on_started_leading()
                elif self.leading and now - self._last_renew >= self.timing.renew_deadline:
                    self.leading = False
                    logger.warning("%s lost the leadership: no renewal for %.1fs", self.identity,
                                   now - self._last_renew)
                    await self.on_stopped_leading()
                await asyncio.sleep(self.timing.retry_period)
        finally:
            if self.leading:
                self.leading = False
                with contextlib.suppress(Exception):
                    await self.on_stopped_leading()

    async def _bounded_try(self) -> bool:
        """One attempt that cannot outlive the renew deadline (a hung call counts as a failure)."""
        budget = self.timing.renew_deadline
        if self.leading:
            budget = max(self.timing.renew_deadline - (self.monotonic() - self._last_renew), 0.0)
        try:
            async with asyncio.timeout(max(min(budget, self.timing.renew_deadline), 0.05)):
                return await self._try()
        except TimeoutError:
            logger.warning("Lease %s/%s: no answer within %.1fs", self.namespace, self.name, budget)
            return False

    async def release(self) -> None:
        """Give the Lease up at once (on a clean stop), so a follower need not wait for it to expire."""
        with contextlib.suppress(ApiError, TimeoutError):
            async with asyncio.timeout(self.timing.renew_deadline):
                lease = await self.client.get(LEASES, self.namespace, self.name)
                spec = lease.get("spec") or {}
                if spec.get("holderIdentity") != self.identity:
                    return
                spec["holderIdentity"] = ""
                spec["leaseDurationSeconds"] = 1
                lease["spec"] = spec
                await self.client.replace(LEASES, lease)

    def _observe(self, spec: Obj) -> float:
        """Note the Lease as read; how long (monotonic seconds) it has looked exactly like this."""
        seen = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"),
                spec.get("leaseDurationSeconds"))
        now = self.monotonic()
        if seen != self._observed:
            self._observed, self._observed_at = seen, now
        return now - self._observed_at

    async def _try(self) -> bool:
        """One acquire-or-renew attempt; True if we hold the Lease afterwards."""
        try:
            lease = await self.client.get(LEASES, self.namespace, self.name)
        except ApiError as exc:
            if not exc.not_found:
                logger.warning("reading Lease %s/%s: %s", self.namespace, self.name, exc)
                return False
            return await self._create()
        spec = lease.get("spec") or {}
        unchanged_for = self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.timing.lease_duration)
        if holder and holder != self.identity and unchanged_for < duration:
            return False  # someone else holds a Lease that is live as far as we have seen
        wall = self.clock()
        if holder != self.identity:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec["acquireTime"] = format_micro_time(wall)
            self.transitions_seen = spec["leaseTransitions"]
        spec.update(holderIdentity=self.identity, renewTime=format_micro_time(wall),
                    leaseDurationSeconds=math.ceil(self.timing.lease_duration))
        lease["spec"] = spec
        return await self._write(self.client.replace, lease)

    async def _create(self) -> bool:
        wall = self.clock()
        spec = {"holderIdentity": self.identity,
                "leaseDurationSeconds": math.ceil(self.timing.lease_duration),
                "acquireTime": format_micro_time(wall), "renewTime": format_micro_time(wall),
                "leaseTransitions": 0}
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
        return await self._write(self.client.create, lease)

    async def _write(self, write: Callable[[Resource, Obj], Awaitable[Obj]], lease: Obj) -> bool:
        """Create or replace the Lease; True when it was written (and what was written is observed)."""
        try:
            written = await write(LEASES, lease)
        except ApiError as exc:
            logger.debug("Lease %s/%s not written: %s", self.namespace, self.name, exc)
            return False
        self._observe(written.get("spec") or {})
        return True
