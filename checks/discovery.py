"""Finding check plugins: the ``kadmit.checks`` entry-point group, or ``module:Class`` written out.

A package makes its check available by declaring, in its pyproject.toml::

    [project.entry-points."kadmit.checks"]
    business-hours = "kadmit_business_hours:BusinessHoursCheck"

and a deployment enables it by that name. The target is a plugin class (instantiated without
arguments), a factory returning a plugin, or a plugin instance.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from kadmit.checks.plugin import AdmissionCheckPlugin, AnyPlugin

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

GROUP = "kadmit.checks"


class PluginError(Exception):
    """A plugin that cannot be found or loaded; the message says which and why, in one line."""


def available() -> dict[str, EntryPoint]:
    """Installed plugins by entry-point name."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def _instantiate(
    target: Any, label: str, configuration: Mapping[str, Any], registry: CollectorRegistry | None
) -> AnyPlugin:
    if isinstance(target, type) and issubclass(target, AdmissionCheckPlugin):
        try:
            plugin: Any = target.from_configuration(configuration, registry)
        except ValueError as exc:
            raise PluginError(f"{label}: configuration: {exc}") from None
    elif callable(target) and not isinstance(target, AdmissionCheckPlugin):
        plugin = target()
    else:
        plugin = target
    name = getattr(plugin, "controller_name", None)
    evaluate = getattr(plugin, "evaluate", None)
    if not isinstance(name, str) or not name:
        raise PluginError(f"{label}: {type(plugin).__name__} has no controller_name")
    if evaluate is None or not inspect.iscoroutinefunction(evaluate):
        raise PluginError(f"{label}: {type(plugin).__name__}.evaluate must be an async method")
    if type(plugin).evaluate is AdmissionCheckPlugin.evaluate:
        raise PluginError(f"{label}: {type(plugin).__name__} does not implement evaluate")
    return plugin  # type: ignore[no-any-return]


def load(
    spec: str, configuration: Mapping[str, Any] | None = None, registry: CollectorRegistry | None = None
) -> AnyPlugin:
    """One plugin, by entry-point name or as ``package.module:Attribute``.

    A plugin class is built by its ``from_configuration`` with ``configuration`` (the Kueue
    Configuration document, ``{}`` if None) and ``registry`` (where its metrics go).
    """
    installed = available()
    try:
        if spec in installed:
            target = installed[spec].load()
        elif ":" in spec:
            module_name, _, attribute = spec.partition(":")
            target = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        else:
            known = ", ".join(sorted(installed)) or "none installed"
            raise PluginError(f"no admission-check plugin named {spec!r} (available: {known})")
    except PluginError:
        raise
    except Exception as exc:  # an import error or a missing attribute inside a plugin package
        raise PluginError(f"cannot load check plugin {spec!r}: {type(exc).__name__}: {exc}") from exc
    try:
        return _instantiate(target, spec, configuration or {}, registry)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(f"cannot create check plugin {spec!r}: {type(exc).__name__}: {exc}") from exc


def load_all(
    specs: Iterable[str], configuration: Mapping[str, Any] | None = None,
    registry: CollectorRegistry | None = None,
) -> list[AnyPlugin]:
    """The enabled plugins, in order; two claiming one controllerName is an error."""
    plugins: list[AnyPlugin] = []
    owners: dict[str, str] = {}
    for spec in specs:
        plugin = load(spec, configuration, registry)
        if plugin.controller_name in owners:
            raise PluginError(f"{spec!r} and {owners[plugin.controller_name]!r} both claim controllerName "
                              f"{plugin.controller_name!r}")
        owners[plugin.controller_name] = spec
        plugins.append(plugin)
    return plugins
