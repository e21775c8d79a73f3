"""Self-managed certificates, end to end: Secret → served pair → caBundle, kept that way.

One loop, woken by time (the next renewal :func:`kadmit.certs.rotation.next_check` predicts), by the
Secret changing (another replica rotated it) or by a webhook configuration or CRD changing
(someone erased the caBundle). Each pass is level-triggered: converge the Secret, serve its pair,
inject its bundle. ``ready`` is true only once the pair is served and the bundle is in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Callable

from kadmit.certs.injector import CABundleInjector
from kadmit.certs.rotation import CertificateState, RotationPolicy, next_check
from kadmit.certs.secret_store import Clock, SecretStore, converge, utcnow
from kadmit.kube import Client, Informer
from kadmit.kube.resources import SECRETS

# How long the webhook configurations may be missing before that is worth a warning.
UNINJECTED_WARNING_AFTER = dt.timedelta(minutes=1)

log = logging.getLogger("kadmit.certs")

PairLoader = Callable[[bytes, bytes], object]
MAX_BACKOFF = 60.0


class CertificateManager:
    """Keeps the webhook's serving certificate valid, shared by all replicas, and trusted."""

    def __init__(
        self,
        client: Client,
        load: PairLoader,
        service: str,
        namespace: str,
        policy: RotationPolicy | None = None,
        store: SecretStore | None = None,
        injector: CABundleInjector | None = None,
        clock: Clock = utcnow,
        retry_delay: float = 2.0,
    ) -> None:
        self.client = client
        self.load = load
        self.service = service
        self.namespace = namespace
        self.policy = policy or RotationPolicy()
        self.store = store or SecretStore(client, namespace)
        self.injector = injector or CABundleInjector(client, service, namespace)
        self.clock = clock
        self.retry_delay = retry_delay
        self.state: CertificateState | None = None
        self.loaded = False
        self.injected = False
        self._wake = asyncio.Event()
        self._uninjected_since: dt.datetime | None = None  # a missing configuration is normal at install
        self._trusted: tuple[bytes, dt.datetime] | None = None  # a bundle, and since when it is injected
        self._warned = False

    @property
    def ready(self) -> bool:
        """For ``/readyz``: the certificate is served and the API server has the bundle to verify it."""
        return self.loaded and self.injected

    def wake(self) -> None:
        self._wake.set()

    async def reconcile(self) -> dt.datetime:
        """One level-triggered pass; returns when the next pass is due at the latest."""
        state = await converge(self.store, self.service, self.namespace, self.policy, self.clock,
                               self._trusted_since)
        assert state.serving is not None
        self.load(state.serving.cert_pem, state.serving.key_pem)
        self.loaded = True
        self.state = state
        await self.injector.inject(state.bundle)
        self.injected = await self.injector.is_injected(state.bundle)
        if self.injected and (self._trusted is None or self._trusted[0] != state.bundle):
            self._trusted = (state.bundle, self.clock())
        self._report_injection()
        return next_check(state, self.policy, self.clock(), self._trusted_since(state.bundle))

    def _trusted_since(self, bundle: bytes) -> dt.datetime | None:
        """Since when ``bundle`` has been seen in every webhook configuration (None: not seen)."""
        if self._trusted is not None and self._trusted[0] == bundle:
            return self._trusted[1]
        return None

    def _report_injection(self) -> None:
        """Info while the webhook configurations may still be on their way (kadmit starts before
        ``kubectl apply`` reaches them); one warning once that has lasted a minute."""
        if self.injected:
            self._uninjected_since, self._warned = None, False
            return
        now = self.clock()
        if self._uninjected_since is None:
            self._uninjected_since = now
            log.info("waiting for kadmit's webhook configurations, to inject the caBundle")
        elif not self._warned and now - self._uninjected_since >= UNINJECTED_WARNING_AFTER:
            self._warned = True
            log.warning("no kadmit webhook configuration carries the caBundle after %ds: are they installed?",
                        int((now - self._uninjected_since).total_seconds()))

    async def run(self) -> None:
        """Reconcile until cancelled, woken by changes of the Secret and of the injection targets."""
        watchers = [*self.injector.informers(),
                    Informer(self.client, SECRETS, namespace=self.store.namespace,
                             field_selector=f"metadata.name={self.store.name}")]
        for informer in watchers:
            # What the first list finds is what the first pass reads anyway: wake on changes only.
            informer.add_handler(lambda *_, seen=informer: self.wake() if seen.synced else None)
            await informer.start()
        failures = 0
        try:
            while True:
                self._wake.clear()
                try:
                    due = await self.reconcile()
                    failures = 0
                    # Until then only a watch event wakes us (say, the webhook configurations
                    # appearing): nothing here polls the API server.
                    delay = max(0.0, (due - self.clock()).total_seconds())
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # Back off while the API server is unreachable or refuses us; a watch event
                    # (the Secret or a webhook configuration changing) still wakes us at once.
                    delay = min(self.retry_delay * 2**failures, MAX_BACKOFF)
                    failures += 1
                    log.exception("certificate reconcile failed; retrying in %.1f s", delay)
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation
                # that arrives as the event is set, leaving this loop running after stop.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
        finally:
            await asyncio.gather(*(informer.stop() for informer in watchers))
