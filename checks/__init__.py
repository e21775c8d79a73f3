"""AdmissionCheck plugin SDK, its runner, and the built-in checks.

A plugin author needs only what is exported here::

    from kadmit.checks import AdmissionCheckPlugin, CheckContext, Pending, Ready, Rejected, Retry

and, to test it against kadmit on a local cluster, ``from kadmit.checks.testing import LocalKueue``
(not imported here: it starts subprocesses and is for tests only).
"""

from kadmit import under_one_name

under_one_name(__name__)

from kadmit.checks.plugin import (
    ActiveCondition,
    ActiveContext,
    AdmissionCheckPlugin,
    CheckContext,
    ClusterView,
    ParametersError,
    plugin_settings,
)
from kadmit.checks.verdict import Pending, PodSetUpdate, Ready, Rejected, Retry, Verdict
from kadmit.kube import Resource

__all__ = [
    "ActiveCondition",
    "ActiveContext",
    "AdmissionCheckPlugin",
    "CheckContext",
    "ClusterView",
    "ParametersError",
    "Pending",
    "PodSetUpdate",
    "Ready",
    "Rejected",
    "Resource",
    "Retry",
    "Verdict",
    "plugin_settings",
]
