"""Connections to MultiKueue worker clusters (kueue-contract.md §1.8, §7 "MultiKueueCluster → connection").

A :class:`WorkerConnection` holds one worker's kubernetes-asyncio client, built from the
kubeconfig a MultiKueueCluster points at, and follows the worker's Workloads and job objects (of
every kind an adapter dispatches) that carry our origin label with a list+watch, so that every
remote change re-queues the manager Workload it belongs to. A broken watch marks the worker
disconnected (and records since when); the connection is retried with Kueue's backoff,
``5s * 2**(min(n, 7) - 1)``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import ipaddress
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from kadmit.checks.multikueue_remote import ORIGIN_LABEL, local_workload_of
from kadmit.kube import ApiError, Client, NotFound, Obj, Resource
from kadmit.kube.errors import error_from_status
from kadmit.kube.resources import WORKLOADS
from kadmit.workload import format_time

logger = logging.getLogger(__name__)


KUBECONFIG_KEY = "kubeconfig"
BAD_KUBECONFIG = "BadKubeConfig"
INSECURE_KUBECONFIG = "InsecureKubeConfig"
CLIENT_CONNECTION_FAILED = "ClientConnectionFailed"
PROFILES_DISABLED = "MultiKueueClusterProfileFeatureDisabled"
CONNECTED = "Connected"
MAX_BACKOFF_EXPONENT = 7
WATCH_SECONDS = 300
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

RemoteKey = tuple[str, str]  # (namespace, manager Workload name)


class KubeConfigError(Exception):
    """A kubeconfig MultiKueue will not use; ``reason`` is the Active condition's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def validate_kubeconfig(config: Any) -> None:
    """Kueue's rules: inline credentials only, a server whose host is an IP or a DNS name."""
    if not isinstance(config, dict):
        raise KubeConfigError(BAD_KUBECONFIG, "the kubeconfig is not a YAML mapping")
    clusters = [c.get("cluster") or {} for c in config.get("clusters") or [] if isinstance(c, dict)]
    users = [u.get("user") or {} for u in config.get("users") or [] if isinstance(u, dict)]
    if not clusters:
        raise KubeConfigError(BAD_KUBECONFIG, "the kubeconfig has no cluster")
    for cluster in clusters:
        if cluster.get("insecure-skip-tls-verify"):
            raise KubeConfigError(INSECURE_KUBECONFIG, "insecure-skip-tls-verify is not allowed")
        if cluster.get("certificate-authority"):
            raise KubeConfigError(INSECURE_KUBECONFIG, "certificate-authority file paths are not allowed, "
                                  "use certificate-authority-data")
        server = cluster.get("server")
        if not isinstance(server, str) or not server:
            raise KubeConfigError(BAD_KUBECONFIG, "the kubeconfig's cluster has no server")
        host = _host_of(server)
        if not _valid_host(host):
            raise KubeConfigError(BAD_KUBECONFIG,
                                  f"server host {host!r} is neither an IP nor a DNS subdomain")
    for user in users:
        for key, what in (("tokenFile", "tokenFile"), ("token-file", "tokenFile"),
                          ("username", "basic authentication"), ("password", "basic authentication"),
                          ("exec", "exec plugins"), ("auth-provider", "auth providers"),
                          ("client-certificate", "client-certificate file paths"),
                          ("client-key", "client-key file paths")):
            if user.get(key):
                verb = "are" if what.endswith("s") else "is"
                raise KubeConfigError(INSECURE_KUBECONFIG, f"{what} {verb} not allowed")


def _host_of(server: str) -> str:
    rest = server.split("://", 1)[-1].split("/", 1)[0]
    if rest.startswith("["):
        return rest[1:].split("]", 1)[0]
    return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return len(host) <= 253 and _DNS_SUBDOMAIN.fullmatch(host) is not None


async def kubeconfig_text(
    cluster: Obj, secret: Callable[[str], Obj | None], path_root: str | None
) -> str:
    """The kubeconfig a MultiKueueCluster names (Secret key ``kubeconfig``, or a file), as text."""
    source = (cluster.get("spec") or {}).get("clusterSource") or {}
    if source.get("clusterProfileRef"):
        raise KubeConfigError(PROFILES_DISABLED,
                              "clusterProfileRef needs the MultiKueueClusterProfile feature")
    kube_config = source.get("kubeConfig") or {}
    location = kube_config.get("location")
    if not isinstance(location, str) or not location:
        raise KubeConfigError(BAD_KUBECONFIG, "spec.clusterSource.kubeConfig.location is required")
    location_type = kube_config.get("locationType") or "Secret"
    if location_type == "Secret":
        obj = secret(location)
        if obj is None:
            raise KubeConfigError(BAD_KUBECONFIG, f'secrets "{location}" not found')
        data = (obj.get("data") or {}).get(KUBECONFIG_KEY)
        if data is None:
            raise KubeConfigError(BAD_KUBECONFIG, f'key "{KUBECONFIG_KEY}" not found in secret "{location}"')
        try:
            return base64.b64decode(str(data), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise KubeConfigError(BAD_KUBECONFIG, f'key "{KUBECONFIG_KEY}" of secret "{location}" '
                                  "is not base64-encoded text") from None
    if location_type == "Path":
        return await asyncio.to_thread(_read_path, location, path_root)
    raise KubeConfigError(BAD_KUBECONFIG, f"unknown locationType {location_type!r}")


def _read_path(location: str, path_root: str | None) -> str:
    if path_root is not None:
        if not os.path.isabs(location) or ".." in Path(location).parts:
            raise KubeConfigError(BAD_KUBECONFIG,
                                  f"kubeconfig path {location!r} must be absolute, without '..'")
        resolved = os.path.realpath(location)
        root = os.path.realpath(path_root)
        if os.path.commonpath([resolved, root]) != root:
            raise KubeConfigError(BAD_KUBECONFIG, f"kubeconfig path {location!r} is not under {path_root}")
    try:
        return Path(location).read_text()
    except OSError as exc:
        raise KubeConfigError(BAD_KUBECONFIG, f"cannot read kubeconfig {location}: {exc.strerror}") from None


def parse_kubeconfig(text: str) -> Obj:
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeConfigError(BAD_KUBECONFIG, f"the kubeconfig is not valid YAML: {exc}".splitlines()[0]) \
            from None
    validate_kubeconfig(config)
    assert isinstance(config, dict)
    return config


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def reconnect_delay(attempts: int, base: float) -> float:
    """Kueue's ``5s * 2**(min(n, 7) - 1)`` with ``base`` for 5s."""
    return float(base * 2 ** (min(max(attempts, 1), MAX_BACKOFF_EXPONENT) - 1))


class WorkerConnection:
    """One worker: a client, the watches on our remote objects, and whether they are alive."""

    def __init__(
        self,
        name: str,
        config: Obj,
        config_fingerprint: str,
        *,
        origin: str,
        on_remote: Callable[[RemoteKey], None],
        on_state: Callable[[str], None],
        reconnect_base: float,
        kinds: Sequence[Resource] = (),
        request_timeout: float = 10.0,
    ) -> None:
        """``kinds``: the job kinds whose remote copies to follow (those the worker does not serve
        are skipped: their copies cannot exist there)."""
        self.name = name
        self.kinds = tuple(kinds)
        self.served: tuple[Resource, ...] = ()  # the kinds the worker served at the last connection
        # What the watches have of our remote objects, by kind and (namespace, name): read while
        # connected instead of asking the worker (a change re-queues the Workload anyway).
        self._cache: dict[Resource, dict[tuple[str, str], Obj]] = {}
        self.fingerprint = config_fingerprint
        self._config = config
        self._origin = origin
        self._on_remote = on_remote
        self._on_state = on_state
        self._reconnect_base = reconnect_base
        self._request_timeout = request_timeout
        self.api: Client | None = None
        self.connected = False
        self.lost_since: float | None = None  # POSIX seconds
        self.attempts = 0
        self.last_error = ""
        self.next_attempt: float | None = None  # POSIX seconds
        self._task: asyncio.Task[None] | None = None
        self._follow_task: asyncio.Task[None] | None = None
        self._failure = ""

    def report_failure(self, exc: BaseException) -> None:
        """A request to the worker failed to connect: the watches may not know yet, so start over."""
        if self.connected and self._follow_task is not None and not self._follow_task.done():
            self._failure = _describe(exc)
            self._follow_task.cancel()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"multikueue-worker-{self.name}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if self.api is not None:
            with contextlib.suppress(Exception):
                await self.api.close()
        self.api = None
        self.connected = False

    def describe(self) -> tuple[bool, str, str]:
        """``(status, reason, message)`` for the MultiKueueCluster's Active condition."""
        if self.connected:
            return True, "Active", CONNECTED
        message = self.last_error or "connecting"
        if self.attempts:
            message += f"; connection attempts: {self.attempts}"
        if self.next_attempt is not None:
            message += f", next connection attempt: {format_time(self.next_attempt)}"
        return False, CLIENT_CONNECTION_FAILED, message

    def cached(self, kind: Resource, namespace: str, name: str) -> Obj | None:
        """Our copy of ``kind`` named ``namespace/name`` as the watch last saw it (None: none)."""
        return self._cache.get(kind, {}).get((namespace, name))

    def watches(self, kind: Resource) -> bool:
        """Whether :meth:`cached` knows ``kind`` (connected, and the worker serves it)."""
        return self.connected and kind in self._cache

    @property
    def _selector(self) -> str:
        return f"{ORIGIN_LABEL}={self._origin}"

    async def _run(self) -> None:
        while True:
            try:
                if self.api is None:
                    self.api = await Client.from_kubeconfig_dict(self._config,
                                                                 request_timeout=self._request_timeout)
                self._follow_task = asyncio.create_task(self._follow())
                try:
                    await asyncio.wait({self._follow_task})
                finally:
                    self._follow_task.cancel()
                if self._follow_task.cancelled():
                    raise ConnectionError(self._failure or "the watches were stopped")
                self._follow_task.result()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a worker that cannot be reached: say why, retry later
                self._failure = ""
                self.attempts += 1
                if self.lost_since is None:
                    self.lost_since = time.time()
                delay = reconnect_delay(self.attempts, self._reconnect_base)
                self.next_attempt = time.time() + delay
                self.last_error = _describe(exc)
                was_connected, self.connected = self.connected, False
                if was_connected:
                    logger.warning("MultiKueue worker %s lost: %s", self.name, self.last_error)
                self._on_state(self.name)
                await asyncio.sleep(delay)

    async def _follow(self) -> None:
        """List, report connected, then watch Workloads and job objects until a watch fails."""
        assert self.api is not None
        lists = {WORKLOADS: await self.api.list(WORKLOADS, label_selector=self._selector)}
        for kind in self.kinds:
            try:
                lists[kind] = await self.api.list(kind, label_selector=self._selector)
            except NotFound:  # the worker does not serve this kind (its CRD is not installed)
                continue
        self.served = tuple(kind for kind in lists if kind != WORKLOADS)
        self._cache = {kind: {_key(item): item for item in listed.get("items") or []}
                       for kind, listed in lists.items()}
        self.connected, self.attempts, self.lost_since = True, 0, None
        self.last_error, self.next_attempt = "", None
        self._on_state(self.name)
        for kind, listed in lists.items():
            for item in listed.get("items") or []:
                self._notify(kind, item)
        await asyncio.gather(*(
            self._watch(kind, str(listed["metadata"].get("resourceVersion", "")))
            for kind, listed in lists.items()
        ))

    async def _watch(self, kind: Resource, resource_version: str) -> None:
        assert self.api is not None
        while True:
            try:
                events = self.api.watch(kind, resource_version=resource_version,
                                        label_selector=self._selector, timeout_seconds=WATCH_SECONDS)
                async for event in events:
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise error_from_status(obj)
                    resource_version = str((obj.get("metadata") or {}).get("resourceVersion")
                                           or resource_version)
                    if event.get("type") == "DELETED":
                        self._cache.setdefault(kind, {}).pop(_key(obj), None)
                    elif event.get("type") != "BOOKMARK":
                        self._cache.setdefault(kind, {})[_key(obj)] = obj
                    if event.get("type") != "BOOKMARK":
                        self._notify(kind, obj)
            except ApiError as exc:
                if exc.status not in (410, 504):  # expired / too new: relist, the worker is fine
                    raise
                listed = await self.api.list(kind, label_selector=self._selector)
                resource_version = str(listed["metadata"].get("resourceVersion", ""))
                gone = set(self._cache.get(kind, {}))
                self._cache[kind] = {_key(item): item for item in listed.get("items") or []}
                for item in listed.get("items") or []:
                    self._notify(kind, item)
                for namespace, name in gone - set(self._cache[kind]):
                    self._notify(kind, {"metadata": {"namespace": namespace, "name": name}})

    def _notify(self, kind: Resource, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace")
        name = meta.get("name") if kind == WORKLOADS else local_workload_of(obj)
        if namespace and name:
            self._on_remote((str(namespace), str(name)))


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
