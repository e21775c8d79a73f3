"""The admission-check plugins inside kadmit: the ``checks`` runner, fed by the manager's informers.

While kadmit leads, a :class:`kadmit.checks.runner.CheckRunner` runs the installed plugins (the
``kadmit.checks`` entry points: ``resourcequota``, ``provisioning`` and any third-party one) for
the AdmissionChecks naming their controller. It reads through the manager's shared informers
(:class:`kadmit.kube.Informers`), so Workloads, ClusterQueues and AdmissionChecks are listed and
watched once. A plugin whose kinds the cluster does not serve (e.g. no ProvisioningRequest CRD)
is skipped, with a log line saying why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kadmit.checks.discovery import PluginError, available, load
from kadmit.checks.plugin import AnyPlugin
from kadmit.checks.runner import CheckRunner, required_watches
from kadmit.kube import Client
from kadmit.kube.retry import served

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kadmit.controller.manager import Manager

logger = logging.getLogger(__name__)


async def servable_plugins(
    kube: Client,
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
        missing = [kind for kind, _ in required_watches([plugin]) if not await served(kube, kind)]
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


class AdmissionChecksLoop:
    """One runner per term of leadership (a stopped runner is not restarted)."""

    def __init__(self, manager: Manager, plugins: Sequence[AnyPlugin], **runner_options: Any) -> None:
        self.manager = manager
        self.plugins = list(plugins)
        self.runner_options = runner_options
        self.runner: CheckRunner | None = None

    async def start(self) -> None:
        """Run the plugins on the manager's informers (and theirs, made once and kept warm)."""
        if not self.plugins or self.runner is not None:
            return
        runner = CheckRunner(self.manager.kube, self.plugins, watches=self.manager.informers.watch,
                             event_pace=self.manager.events.pace, **self.runner_options)
        await runner.start()
        self.runner = runner

    async def stop(self) -> None:
        runner, self.runner = self.runner, None
        if runner is not None:
            await runner.stop()
