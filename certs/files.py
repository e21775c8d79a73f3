"""cert-manager mode: serve the certificate files mounted from a Secret, reloading when they change.

The kubelet updates a mounted Secret by swapping a ``..data`` symlink, so an inotify watch on
the files themselves misses updates and one on the directory sees a burst of events. Reading
the two small files every couple of seconds (in a worker thread, so the event loop never waits
on the disk) is simpler and catches every kind of update; a torn pair (a new certificate with
the old key, from a writer that is not atomic) is refused by the loader and retried at the next
poll, while the previous pair keeps being served.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("kadmit.certs.files")

PairLoader = Callable[[bytes, bytes], object]
"""Installs a certificate/key pair; raises ValueError when the pair is unusable."""


class CertificateFiles:
    """Watches ``tls.crt``/``tls.key`` in ``directory`` and hands each new pair to ``load``."""

    def __init__(
        self,
        directory: str | Path,
        load: PairLoader,
        interval: float = 2.0,
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
    ) -> None:
        self.directory = Path(directory)
        self.load = load
        self.interval = interval
        self.cert_path = self.directory / cert_name
        self.key_path = self.directory / key_name
        self.loaded = False
        self._applied: str | None = None
        self._refused: str | None = None

    def _read(self) -> tuple[bytes, bytes]:
        return self.cert_path.read_bytes(), self.key_path.read_bytes()

    async def check(self) -> bool:
        """Load the files if they changed since the last good load; returns whether a new pair went in."""
        try:
            cert, key = await asyncio.to_thread(self._read)
        except OSError as exc:
            if self._refused != str(exc):
                log.warning("cannot read the serving certificate: %s", exc)
                self._refused = str(exc)
            return False
        digest = hashlib.sha256(cert + b"\0" + key).hexdigest()
        if digest in (self._applied, self._refused):
            return False
        try:
            self.load(cert, key)
        except ValueError as exc:
            log.warning("not serving the certificate in %s: %s", self.directory, exc)
            self._refused = digest
            return False
        self._applied = digest
        self._refused = None
        self.loaded = True
        log.info("serving the certificate from %s", self.cert_path)
        return True

    async def run(self) -> None:
        """Poll until cancelled."""
        while True:
            await self.check()
            await asyncio.sleep(self.interval)
