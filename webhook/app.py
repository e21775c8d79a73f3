"""The whole webhook server in one call: every path of kadmit's webhook configurations.

The manager builds its :class:`kadmit.webhook.jobs.ClusterView` from the informer caches, its
readiness from the certificate manager, and hands them here.
"""

from __future__ import annotations

from aiohttp import web

from kadmit.webhook.apps import DeploymentWebhooks, LeaderWorkerSetWebhooks, StatefulSetWebhooks
from kadmit.webhook.appwrappers import AppWrapperWebhooks
from kadmit.webhook.conversion import handle_conversion_review
from kadmit.webhook.jobs import BatchJobWebhooks, ClusterView, JobWebhookConfig
from kadmit.webhook.jobsets import JobSetWebhooks
from kadmit.webhook.kubeflow import kubeflow_webhooks
from kadmit.webhook.kueue import KnownWorkload, KueueWebhooks
from kadmit.webhook.metrics import WebhookMetrics
from kadmit.webhook.pods import PodOptions, PodWebhooks
from kadmit.webhook.ray import RayClusterWebhooks, RayJobWebhooks
from kadmit.webhook.review import Webhook
from kadmit.webhook.server import Readiness, create_app
from kadmit.webhook.trainjob import TrainJobWebhooks

CONVERT_PATH = "/convert"


def all_webhooks(
    view: ClusterView,
    config: JobWebhookConfig | None = None,
    partial_admission: bool = True,
    incremental_dispatch: bool = False,
    pod_options: PodOptions | None = None,
    concurrent_admission: bool = False,
    known_workload: KnownWorkload | None = None,
) -> list[Webhook]:
    """The webhooks of every job kind (Job, JobSet, the Kubeflow kinds, TrainJob, Pod, the apps
    kinds, KubeRay, AppWrapper) and of every Kueue kind.

    ``incremental_dispatch``: Configuration ``multiKueue.dispatcherName`` is
    ``kueue.x-k8s.io/multikueue-dispatcher-incremental``; ``concurrent_admission``: the
    ConcurrentAdmission feature gate; ``known_workload``: the engine's reading of a Workload,
    which a status review takes the pod sets from.
    """
    return (
        BatchJobWebhooks(view, config).webhooks()
        + JobSetWebhooks(view, config).webhooks()
        + kubeflow_webhooks(view, config)
        + TrainJobWebhooks(view, config).webhooks()
        + PodWebhooks(view, config, pod_options).webhooks()
        + DeploymentWebhooks(view, config).webhooks()
        + StatefulSetWebhooks(view, config).webhooks()
        + LeaderWorkerSetWebhooks(view, config).webhooks()
        + RayJobWebhooks(view, config).webhooks()
        + RayClusterWebhooks(view, config).webhooks()
        + AppWrapperWebhooks(view, config).webhooks()
        + KueueWebhooks(
            partial_admission, incremental_dispatch, concurrent_admission, known_workload
        ).webhooks()
    )


def create_webhook_app(
    view: ClusterView,
    config: JobWebhookConfig | None = None,
    readiness: Readiness = lambda: True,
    partial_admission: bool = True,
    metrics: WebhookMetrics | None = None,
    incremental_dispatch: bool = False,
    pod_options: PodOptions | None = None,
    concurrent_admission: bool = False,
    known_workload: KnownWorkload | None = None,
) -> web.Application:
    """The aiohttp application serving admission, ``/convert``, ``/healthz`` and ``/readyz``."""
    return create_app(
        all_webhooks(
            view, config, partial_admission, incremental_dispatch, pod_options, concurrent_admission,
            known_workload,
        ),
        readiness=readiness,
        extra={CONVERT_PATH: handle_conversion_review},
        metrics=metrics,
    )
