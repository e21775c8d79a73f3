"""cert-manager mode: a mounted Secret's files are reloaded into the running server."""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path

import aiohttp

from kadmit.certs.authority import KeyPair, issue_ca, issue_serving
from kadmit.certs.files import CertificateFiles
from kadmit.webhook.server import WebhookServer, create_app
from kadmit.webhook.tls import ServingTLS

NAME = "kadmit-webhook-service.kadmit-system.svc"


def kubelet_write(directory: Path, pair: KeyPair, generation: int) -> None:
    """Write as the kubelet does: a new timestamped dir, then swap the ``..data`` symlink."""
    data = directory / f"..{generation}"
    data.mkdir()
    (data / "tls.crt").write_bytes(pair.cert_pem)
    (data / "tls.key").write_bytes(pair.key_pem)
    tmp_link = directory / "..data_tmp"
    os.symlink(data.name, tmp_link)
    os.replace(tmp_link, directory / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (directory / name).is_symlink():
            os.symlink(f"..data/{name}", directory / name)


async def test_mounted_files_are_served_and_hot_reloaded(tmp_path: Path) -> None:
    ca = issue_ca()
    first, second = issue_serving(ca, "kadmit-webhook-service", "kadmit-system"), None
    kubelet_write(tmp_path, first, 1)
    tls = ServingTLS()
    files = CertificateFiles(tmp_path, tls.load, interval=0.05)
    assert files.loaded is False
    assert await files.check() is True and files.loaded
    assert await files.check() is False  # unchanged files are not reloaded

    server = WebhookServer(create_app([]), tls.context, host="127.0.0.1", port=0)
    await server.start()
    watcher = asyncio.create_task(files.run())
    try:
        client = ssl.create_default_context(cadata=ca.cert_pem.decode())
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=client, force_close=True)
        ) as session:
            url = f"https://127.0.0.1:{server.port}/healthz"
            async with session.get(url, server_hostname=NAME) as resp:
                assert resp.status == 200
            first_fingerprint = tls.fingerprint
            second = issue_serving(ca, "kadmit-webhook-service", "kadmit-system")
            kubelet_write(tmp_path, second, 2)
            for _ in range(100):
                if tls.fingerprint != first_fingerprint:
                    break
                await asyncio.sleep(0.02)
            assert tls.fingerprint != first_fingerprint
            async with session.get(url, server_hostname=NAME) as resp:
                assert resp.status == 200
    finally:
        watcher.cancel()
        await server.stop()


async def test_a_torn_pair_is_refused_until_it_is_whole(tmp_path: Path) -> None:
    ca = issue_ca()
    good = issue_serving(ca, "s", "n")
    (tmp_path / "tls.crt").write_bytes(good.cert_pem)
    (tmp_path / "tls.key").write_bytes(good.key_pem)
    tls = ServingTLS()
    files = CertificateFiles(tmp_path, tls.load)
    assert await files.check() is True
    served = tls.fingerprint
    newer = issue_serving(ca, "s", "n")
    (tmp_path / "tls.crt").write_bytes(newer.cert_pem)  # the key has not arrived yet
    assert await files.check() is False
    assert tls.fingerprint == served
    (tmp_path / "tls.key").write_bytes(newer.key_pem)
    assert await files.check() is True
    assert tls.fingerprint != served


async def test_missing_files_are_not_fatal(tmp_path: Path) -> None:
    files = CertificateFiles(tmp_path / "absent", ServingTLS().load)
    assert await files.check() is False
    assert files.loaded is False
