"""AdmissionCheck plugin SDK, its runner, and the built-in checks.

A plugin author needs only what is exported here::

    from checks import AdmissionCheckPlugin, CheckContext, Pending, Ready, Rejected, Retry
"""

from checks.kinds import Kind
from checks.plugin import (
    ActiveCondition,
    ActiveContext,
    AdmissionCheckPlugin,
    CheckContext,
    ClusterView,
    ParametersError,
    plugin_settings,
)
from checks.verdict import Pending, PodSetUpdate, Ready, Rejected, Retry, Verdict

__all__ = [
    "ActiveCondition",
    "ActiveContext",
    "AdmissionCheckPlugin",
    "CheckContext",
    "ClusterView",
    "Kind",
    "ParametersError",
    "Pending",
    "PodSetUpdate",
    "Ready",
    "Rejected",
    "Retry",
    "Verdict",
    "plugin_settings",
]
