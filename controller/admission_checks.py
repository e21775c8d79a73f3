"""The admission-check plugins inside kadmit: the ``checks`` runner, fed by the manager's informers.

While kadmit leads, a :class:`kadmit.checks.runner.CheckRunner` runs the installed plugins (the
``kadmit.checks`` entry points: ``resourcequota``, ``provisioning`` and any third-party one) for
the AdmissionChecks naming their controller. It reads through the same informers the manager
keeps, so Workloads, ClusterQueues and AdmissionChecks are listed and watched once. A plugin
whose kinds the cluster does not serve (e.g. no ProvisioningRequest CRD) is skipped, with a log
line saying why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kadmit.checks.discovery import PluginError, available, load
from kadmit.checks.kinds import Kind
from kadmit.checks.plugin import AnyPlugin
from kadmit.checks.runner import CheckRunner, required_kinds
from kadmit.controller.informer import Informer
from kadmit.controller.kube import ApiError, Kube, Resource

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kadmit.controller.manager import Manager

logger = logging.getLogger(__name__)


class SharedInformers:
    """The runner's watch factory: the manager's informer for a kind it has, a new one otherwise."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.own: dict[Kind, Informer] = {}

    async def __call__(self, kind: Kind) -> Informer:
        shared = self.manager.informers.get(Resource(kind.group, kind.version, kind.plural))
        if shared is not None:
            return shared
        informer = self.own.get(kind)
        if informer is None:
            informer = Informer(self.manager.api_client, kind.group, kind.version, kind.plural,
                                namespace=kind.watch_namespace)
            await informer.start()
            self.own[kind] = informer
        return informer

    async def stop(self) -> None:
        for informer in self.own.values():
            await informer.stop()
        self.own.clear()


async def servable_plugins(
    kube: Kube,
    names: Sequence[str] | None = None,
    configuration: Mapping[str, Any] | None = None,
    registry: CollectorRegistry | None = None,
) -> list[AnyPlugin]:
    """The plugins to run: ``names`` (default: every installed one) whose kinds the cluster serves.

    Each is built from ``configuration`` (the Configuration file kadmit runs with, e.g. the
    ``multiKueue`` block) with its metrics in ``registry``. A plugin that cannot be loaded is
    left out with a warning.
    """
    plugins: list[AnyPlugin] = []
    for name in names if names is not None else sorted(available()):
        try:
            plugin = load(name, configuration, registry)
        except PluginError as exc:
            logger.warning("admission-check plugin %s not loaded: %s", name, exc)
            continue
        missing = [kind for kind in required_kinds([plugin]) if not await _served(kube, kind)]
        if missing:
            logger.info(
                "admission-check plugin %s (%s) skipped: the cluster does not serve %s",
                name,
                plugin.controller_name,
                ", ".join(str(k) for k in missing),
            )
            continue
        plugins.append(plugin)
    return plugins


async def _served(kube: Kube, kind: Kind) -> bool:
    try:
        await kube.request("GET", kind.path(), query={"limit": 1})
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    return True


class AdmissionChecksLoop:
    """One runner per term of leadership (a stopped runner is not restarted)."""

    def __init__(self, manager: Manager, plugins: Sequence[AnyPlugin], **runner_options: Any) -> None:
        self.manager = manager
        self.plugins = list(plugins)
        self.runner_options = runner_options
        self.runner: CheckRunner | None = None
        self._pool: SharedInformers | None = None

    async def start(self) -> None:
        if not self.plugins or self.runner is not None:
            return
        self._pool = SharedInformers(self.manager)
        runner = CheckRunner(self.manager.api_client, self.plugins, watches=self._pool, **self.runner_options)
        await runner.start()
        self.runner = runner

    async def stop(self) -> None:
        runner, pool, self.runner, self._pool = self.runner, self._pool, None, None
        if runner is not None:
            await runner.stop()
        if pool is not None:
            await pool.stop()
