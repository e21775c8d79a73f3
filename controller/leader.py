"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does it.

The leader renews the Lease every ``retry_period``; every write is conditional on the
resourceVersion read, so two candidates can never both believe they hold it. A leader that has
not renewed for ``renew_deadline`` steps down on its own (before its Lease can expire and be
taken). A follower takes an expired Lease, so it takes over within ``lease_duration`` of the
leader's last renewal; a leader that stops cleanly empties the holder so a follower takes over
at its next try. The renewals are timed, like client-go's: a Lease has no event for "expired".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from kadmit.controller.kube import LEASES, ApiError, Kube

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
Callback = Callable[[], Awaitable[None]]


def micro_time(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started_leading: Callback,
        on_stopped_leading: Callback,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("need retry_period < renew_deadline < lease_duration")
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.clock = clock
        self.leading = False
        self._last_renew = 0.0
        self.transitions_seen = 0

    async def run(self) -> None:
        try:
            while True:
                held = await self._try()
                now = self.clock()
                if held:
                    self._last_renew = now
                    if not self.leading:
                        self.leading = True
                        logger.info("%s became the leader (Lease %s/%s)", self.identity, self.namespace,
                                    self.name)
                        await self.on_started_leading()
                elif self.leading and now - self._last_renew >= self.renew_deadline:
                    self.leading = False
                    logger.warning("%s lost the leadership: no renewal for %.1fs", self.identity,
                                   now - self._last_renew)
                    await self.on_stopped_leading()
                await asyncio.sleep(self.retry_period)
        finally:
            if self.leading:
                self.leading = False
                with contextlib.suppress(Exception):
                    await self.on_stopped_leading()

    async def release(self) -> None:
        """Give the Lease up at once (on a clean stop), so a follower need not wait for it to expire."""
        with contextlib.suppress(ApiError, OSError):
            lease = await self.kube.get(LEASES, self.namespace, self.name)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            lease["spec"] = spec
            await self.kube.replace(LEASES, lease)

    async def _try(self) -> bool:
        """One acquire-or-renew attempt; True if we hold the Lease afterwards."""
        now = self.clock()
        try:
            lease = await self.kube.get(LEASES, self.namespace, self.name)
        except ApiError as exc:
            if not exc.not_found:
                logger.warning("reading Lease %s/%s: %s", self.namespace, self.name, exc)
                return False
            return await self._create(now)
        except OSError as exc:
            logger.warning("reading Lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        renewed = parse_micro_time(spec.get("renewTime")) or 0.0
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and renewed + duration > now:
            return False  # someone else holds a live Lease
        if holder != self.identity:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec["acquireTime"] = micro_time(now)
            self.transitions_seen = spec["leaseTransitions"]
        spec.update(holderIdentity=self.identity, renewTime=micro_time(now),
                    leaseDurationSeconds=math.ceil(self.lease_duration))
        lease["spec"] = spec
        try:
            await self.kube.replace(LEASES, lease)
        except (ApiError, OSError) as exc:
            logger.debug("Lease %s/%s not written: %s", self.namespace, self.name, exc)
            return False
        return True

    async def _create(self, now: float) -> bool:
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": math.ceil(self.lease_duration),
                "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0}
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
        try:
            await self.kube.create(LEASES, lease)
        except (ApiError, OSError) as exc:
            logger.debug("Lease %s/%s not created: %s", self.namespace, self.name, exc)
            return False
        return True
