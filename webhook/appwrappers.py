"""The ``workload.codeflare.dev/v1beta2`` AppWrapper webhooks (Kueue's ``BaseWebhook`` for AppWrapper).

Mutating (``/mutate-workload-codeflare-dev-v1beta2-appwrapper``, CREATE) and validating
(``/validate-workload-codeflare-dev-v1beta2-appwrapper``, CREATE and UPDATE) are Kueue's generic
job webhooks: default the LocalQueue and priority class, suspend a managed AppWrapper, hand a
MultiKueue one to MultiKueue, Kueue's shared label rules, and kadmit's start guard. The components
an AppWrapper creates are owned by it, so they are not managed on their own.
"""

from __future__ import annotations

from kadmit.webhook.jobs import JobWebhooks

APPWRAPPER_CONTROLLER = "workload.codeflare.dev/appwrapper-controller"


class AppWrapperWebhooks(JobWebhooks):
    gvk = ("workload.codeflare.dev", "v1beta2", "AppWrapper")
    default_managed_by = APPWRAPPER_CONTROLLER
