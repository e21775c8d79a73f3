"""kadmit's configuration file: Kueue's ``Configuration`` object, the subset kadmit acts on.

A Kueue user's ``controller_manager_config.yaml`` works unchanged: ``config.kueue.x-k8s.io/v1beta2``
is read as is, and ``v1beta1`` is converted the way Kueue converts it (a disabled
``waitForPodsReady`` / ``fairSharing`` block becomes absent; an unset v1beta1
``blockAdmission`` means true). Fields kadmit does not know are an error, so that a typo is
never silently ignored; fields Kueue knows but kadmit does not act on are accepted with a
warning naming each of them. docs/configuration.md lists both sets.

One block is a kadmit extension Kueue does not have: ``admissionChecks`` chooses which installed
admission-check plugins kadmit runs (``enabled`` or ``disabled``, by entry-point name) and holds
their own ``settings``.
"""

from __future__ import annotations

import logging
import math
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import durationpy

from kadmit.checks.multikueue import ALL_AT_ONCE, INCREMENTAL, settings_from_config
from kadmit.checks.multikueue import CONFIG_FIELDS as MULTIKUEUE_CONFIG_FIELDS
from kadmit.controller import strict
from kadmit.controller.defaults import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE  # kept importable from here
from kadmit.engine.admission_fair_sharing import DEFAULT_SAMPLING_INTERVAL, AdmissionFairSharing
from kadmit.engine.quantity import QuantityError, parse_exact
from kadmit.engine.transformations import (
    RETAIN,
    STRATEGIES,
    ResourceTransformation,
    ResourceTransformations,
)
from kadmit.kube.leader import DEFAULT_TIMING, LeaseTiming
from kadmit.kube.ratelimit import KUEUE_BURST, TokenBucket
from kadmit.webhook.tls import GO_CIPHER_SUITES, SECURE_CIPHER_SUITES, TLSOptions, unavailable_suites

T = TypeVar("T")

logger = logging.getLogger(__name__)

GROUP = "config.kueue.x-k8s.io"
KIND = "Configuration"
VERSIONS = ("v1beta2", "v1beta1")
DEFAULT_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"  # controller-runtime's, as Kueue's
DEFAULT_CLIENT_BURST = KUEUE_BURST
DEFAULT_CACHE_SYNC_TIMEOUT = 120.0  # controller-runtime's, for zero or unset

# Fields Kueue accepts that kadmit reads but does not act on (warned about, never an error).
IGNORED_FIELDS = frozenset({
    "pprofBindAddress", "tls.curvePreferences",
    "resources.quotaCheckStrategy", "resources.deviceClassMappings",
    "queueVisibility",
    "metrics.customLabels",
})

# Every field of the supported schema: a dict maps a block to its fields; None is a leaf.
_SCHEMA: dict[str, Any] = {
    "apiVersion": None, "kind": None, "namespace": None,
    "manageJobsWithoutQueueName": None, "managedJobsNamespaceSelector": None,
    "webhook": {"port": None, "host": None, "certDir": None},
    "metrics": {"bindAddress": None, "enableClusterQueueResources": None, "customLabels": None,
                "localQueueMetrics": None},
    "health": {"healthProbeBindAddress": None, "readinessEndpointName": None, "livenessEndpointName": None},
    "leaderElection": {"leaderElect": None, "leaseDuration": None, "renewDeadline": None, "retryPeriod": None,
                       "resourceLock": None, "resourceName": None, "resourceNamespace": None},
    "internalCertManagement": {"enable": None, "webhookServiceName": None, "webhookSecretName": None},
    "waitForPodsReady": {"enable": None, "timeout": None, "blockAdmission": None, "recoveryTimeout": None,
                         "requeuingStrategy": {"timestamp": None, "backoffLimitCount": None,
                                               "backoffBaseSeconds": None, "backoffMaxSeconds": None}},
    "integrations": {"frameworks": None, "externalFrameworks": None, "labelKeysToCopy": None,
                     "podOptions": {"namespaceSelector": None, "podSelector": None}},
    "fairSharing": {"enable": None, "preemptionStrategies": None},
    "pprofBindAddress": None, "clientConnection": {"qps": None, "burst": None},
    "controller": {"groupKindConcurrency": None, "cacheSyncTimeout": None},
    "tls": {"minVersion": None, "cipherSuites": None, "curvePreferences": None}, "multiKueue": None,
    "admissionFairSharing": {"usageHalfLifeTime": None, "usageSamplingInterval": None,
                             "resourceWeights": None},
    "resources": {"excludeResourcePrefixes": None, "transformations": None, "quotaCheckStrategy": None,
                  "deviceClassMappings": None},
    "objectRetentionPolicies": {"workloads": {"afterFinished": None, "afterDeactivatedByKueue": None}},
    "queueVisibility": None, "featureGates": None,
    "visibilityServer": {"bindAddress": None, "bindPort": None},
    # kadmit's extension (not in Kueue's schema): which admission-check plugins run
    "admissionChecks": {"enabled": None, "disabled": None, "settings": None},
}

HONOURED_FEATURE_GATES = frozenset({"AdmissionFairSharing", "ConcurrentAdmission", "DisableWaitForPodsReady",
                                    "PartialAdmission", "VisibilityOnDemand"})
# multiKueue: dispatcherName shapes the webhook's rules, and the multikueue check plugin reads
# its CONFIG_FIELDS; the block's other fields are accepted with a warning, like IGNORED_FIELDS.
SUPPORTED_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", "pod", "deployment", "statefulset",
                        "leaderworkerset.x-k8s.io/leaderworkerset", "kubeflow.org/pytorchjob",
                        "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/paddlejob",
                        "kubeflow.org/jaxjob", "kubeflow.org/mpijob", "trainer.kubeflow.org/trainjob",
                        "ray.io/rayjob", "ray.io/raycluster", "workload.codeflare.dev/appwrapper")
# Kueue's frameworks kadmit has no integration for (Kueue's shipped configuration lists rayservice).
KUEUE_ONLY_FRAMEWORKS = ("ray.io/rayservice", "sparkoperator.k8s.io/sparkapplication")
TLS_VERSIONS = {"VersionTLS12": ssl.TLSVersion.TLSv1_2, "VersionTLS13": ssl.TLSVersion.TLSv1_3}
# The curves (TLS supported groups) of the Go Kueue is built with (1.26): P-256, P-384, P-521,
# X25519, SecP256r1MLKEM768, X25519MLKEM768, SecP384r1MLKEM1024.
GO_CURVE_IDS = (23, 24, 25, 29, 4587, 4588, 4589)
PREEMPTION_STRATEGY_SETS = (
    ("LessThanOrEqualToFinalShare", "LessThanInitialShare"),
    ("LessThanOrEqualToFinalShare",),
    ("LessThanInitialShare",),
)


class ConfigError(ValueError):
    """The configuration file cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class RequeuingStrategy:
    timestamp: str = "Eviction"  # or "Creation"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass(frozen=True)
class WaitForPodsReady:
    timeout: float = 1800.0
    recovery_timeout: float | None = 1800.0  # None: recovery is not timed
    block_admission: bool = False
    requeuing_strategy: RequeuingStrategy = field(default_factory=RequeuingStrategy)


@dataclass(frozen=True)
class LeaderElection(LeaseTiming):
    """Kueue's ``leaderElection`` block: whether to elect, the Lease's timing, and the Lease."""

    leader_elect: bool = True
    resource_name: str = "c1f6bfd2.kadmit.dev"
    resource_namespace: str = DEFAULT_NAMESPACE


@dataclass(frozen=True)
class AdmissionCheckPlugins:
    """kadmit's ``admissionChecks`` block: which installed check plugins run (default: all)."""

    enabled: tuple[str, ...] | None = None  # None: every installed plugin
    disabled: tuple[str, ...] = ()

    def select(self, installed: Iterable[str]) -> list[str]:
        """The plugin names to run, given the installed ones."""
        names = sorted(installed) if self.enabled is None else list(self.enabled)
        return [name for name in names if name not in self.disabled]


@dataclass(frozen=True)
class Configuration:
    namespace: str = DEFAULT_NAMESPACE
    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: Mapping[str, Any] | None = None  # None until defaulted
    webhook_host: str = ""
    webhook_port: int = 9443
    webhook_cert_dir: str = DEFAULT_CERT_DIR
    metrics_bind_address: str = ":8080"
    enable_cluster_queue_resources: bool = False
    local_queue_metrics: bool = True
    health_probe_bind_address: str = ":8081"
    readiness_endpoint_name: str = "readyz"
    liveness_endpoint_name: str = "healthz"
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    visibility_server: bool = True  # feature gate VisibilityOnDemand (Beta, on in Kueue)
    visibility_host: str = ""  # visibilityServer.bindAddress ("": every interface)
    visibility_port: int = 8082  # visibilityServer.bindPort
    internal_cert_management: bool = True
    webhook_service_name: str = "kadmit-webhook-service"
    webhook_secret_name: str = "kadmit-webhook-server-cert"
    wait_for_pods_ready: WaitForPodsReady | None = field(default_factory=WaitForPodsReady)
    frameworks: tuple[str, ...] = ("batch/job",)
    label_keys_to_copy: tuple[str, ...] = ()
    # integrations.externalFrameworks: (group, version, kind) of kinds another controller integrates
    external_frameworks: tuple[tuple[str, str, str], ...] = ()
    # integrations.podOptions (v1beta1): which namespaces and Pods the pod integration manages
    pod_namespace_selector: Mapping[str, Any] | None = None
    pod_selector: Mapping[str, Any] | None = None
    fair_sharing_strategies: tuple[str, ...] | None = None  # None: Fair Sharing off
    admission_fair_sharing: AdmissionFairSharing | None = None  # None: Admission Fair Sharing off
    resource_transformations: ResourceTransformations | None = None  # resources: None when empty
    delete_finished_workloads_after: float | None = None  # None: Finished Workloads are kept
    # None: jobs whose Workloads kadmit deactivated are kept
    delete_deactivated_workloads_after: float | None = None
    partial_admission: bool = True  # feature gate PartialAdmission (Beta, on in Kueue)
    concurrent_admission: bool = False  # feature gate ConcurrentAdmission (Alpha, off in Kueue)
    multikueue_dispatcher: str = ALL_AT_ONCE
    # clientConnection: None, no client-side limit (Kueue's default is qps 300, burst 500)
    client_qps: float | None = None
    client_burst: int = DEFAULT_CLIENT_BURST
    # controller.groupKindConcurrency: "Kind.group" ("Pod" for the core group) -> workers
    group_kind_concurrency: Mapping[str, int] = field(default_factory=dict)
    cache_sync_timeout: float = DEFAULT_CACHE_SYNC_TIMEOUT  # controller.cacheSyncTimeout, seconds
    admission_checks: AdmissionCheckPlugins = field(default_factory=AdmissionCheckPlugins)
    # tls: the webhook, metrics and visibility servers' TLS versions and suites
    tls: TLSOptions = field(default_factory=TLSOptions)
    ignored_fields: tuple[str, ...] = ()
    # The file as parsed, for admission-check plugins with settings of their own (``multiKueue``).
    document: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.managed_jobs_namespace_selector is None:
            selector = default_namespace_selector(self.namespace)
            object.__setattr__(self, "managed_jobs_namespace_selector", selector)

    def concurrency(self, kind: str, group: str, default: int) -> int:
        """How many keys of ``kind`` its reconciler works on at once (``groupKindConcurrency``)."""
        return self.group_kind_concurrency.get(f"{kind}.{group}" if group else kind, default)

    def client_rate_limiter(self) -> TokenBucket | None:
        """The token bucket every request of kadmit's client shares, when ``clientConnection.qps`` asks."""
        return None if self.client_qps is None else TokenBucket(self.client_qps, self.client_burst)

    @property
    def incremental_dispatch(self) -> bool:
        """MultiKueue nominates worker clusters a few at a time (the webhook then allows adding them)."""
        return self.multikueue_dispatcher == INCREMENTAL


def default_namespace_selector(namespace: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                  "values": ["kube-system", namespace]}]}


def load(path: str | Path | None) -> Configuration:
    """Read a configuration file; ``None`` gives the defaults."""
    if path is None:
        return Configuration()
    try:  # as strictly as Kueue decodes its configuration (a duplicate key is an error)
        documents = strict.read_documents(str(path))
    except strict.StrictError as exc:
        raise ConfigError(f"config {path}: line {exc.line}: {exc.message}") from exc
    except strict.ReadError as exc:
        raise ConfigError(f"config {path}: {exc}") from exc
    if len(documents) > 1:
        raise ConfigError(f"config {path}: line {documents[1].line}: expected one Configuration document")
    document = documents[0].obj if documents else None
    try:
        return parse(document)
    except ConfigError as exc:
        raise ConfigError(f"config {path}: {exc}") from exc


def parse(document: Any) -> Configuration:
    """Turn a parsed ``Configuration`` document into kadmit's settings, with Kueue's defaults."""
    if not isinstance(document, dict):
        raise ConfigError("expected a Configuration object (a YAML mapping)")
    api_version = document.get("apiVersion")
    if document.get("kind") != KIND or not isinstance(api_version, str) or "/" not in api_version:
        raise ConfigError(f"expected apiVersion {GROUP}/v1beta2 and kind {KIND}, "
                          f"got {api_version!r} {document.get('kind')!r}")
    group, version = api_version.split("/", 1)
    if group != GROUP or version not in VERSIONS:
        raise ConfigError(f"unsupported apiVersion {api_version!r} (supported: "
                          + ", ".join(f"{GROUP}/{v}" for v in VERSIONS) + ")")
    ignored: list[str] = []
    _check_fields(document, _SCHEMA, "", ignored)
    gates = document.get("featureGates") or {}
    if not isinstance(gates, dict) or not all(isinstance(v, bool) for v in gates.values()):
        raise ConfigError("featureGates: must map feature names to true or false")
    ignored.extend(f"featureGates.{name}" for name in gates if name not in HONOURED_FEATURE_GATES)
    dispatcher = _multikueue_dispatcher(document, ignored)
    admission_checks = _admission_checks(_block(document, "admissionChecks"))
    for name in ignored:
        logger.warning("configuration field %s is accepted for compatibility with Kueue but has no effect "
                       "in kadmit", name)
    v1beta1 = version == "v1beta1"
    namespace = _str(document, "namespace", DEFAULT_NAMESPACE)
    webhook = _block(document, "webhook")
    client_connection = _block(document, "clientConnection")
    controller = _block(document, "controller")
    metrics = _block(document, "metrics")
    health = _block(document, "health")
    visibility = _block(document, "visibilityServer")
    certs = _block(document, "internalCertManagement")
    integrations = _block(document, "integrations")
    selector = document.get("managedJobsNamespaceSelector")
    if selector is not None and not isinstance(selector, dict):
        raise ConfigError("managedJobsNamespaceSelector: must be a label selector")
    frameworks = tuple(_str_list(integrations, "integrations.frameworks") or ["batch/job"])
    for framework in frameworks:
        if framework in KUEUE_ONLY_FRAMEWORKS:
            # Refused rather than skipped: its objects would run unqueued, outside every quota.
            raise ConfigError(f"integrations.frameworks: {framework!r} is Kueue's but kadmit does not "
                              f"integrate it yet; remove it to run that kind unqueued "
                              f"(supported: {', '.join(SUPPORTED_FRAMEWORKS)})")
        if framework not in SUPPORTED_FRAMEWORKS:
            raise ConfigError(f"integrations.frameworks: {framework!r} is not supported "
                              f"(supported: {', '.join(SUPPORTED_FRAMEWORKS)})")
    local_queue_metrics = _block(metrics, "metrics.localQueueMetrics")
    pod_options = integrations.get("podOptions")
    if pod_options is not None and not isinstance(pod_options, dict):
        raise ConfigError("integrations.podOptions: must be an object")
    return Configuration(
        namespace=namespace,
        manage_jobs_without_queue_name=_bool(document, "manageJobsWithoutQueueName", False),
        managed_jobs_namespace_selector=selector,
        webhook_host=_str(webhook, "host", "", "webhook."),
        webhook_port=_int(webhook, "port", 9443, "webhook.", minimum=0),
        webhook_cert_dir=_str(webhook, "certDir", DEFAULT_CERT_DIR, "webhook."),
        metrics_bind_address=_str(metrics, "bindAddress", ":8080", "metrics."),
        enable_cluster_queue_resources=_bool(metrics, "enableClusterQueueResources", False, "metrics."),
        local_queue_metrics=_bool(local_queue_metrics, "enable", True, "metrics.localQueueMetrics."),
        health_probe_bind_address=_str(health, "healthProbeBindAddress", ":8081", "health."),
        readiness_endpoint_name=_str(health, "readinessEndpointName", "readyz", "health."),
        liveness_endpoint_name=_str(health, "livenessEndpointName", "healthz", "health."),
        leader_election=_leader_election(_block(document, "leaderElection"), namespace),
        visibility_server=gates.get("VisibilityOnDemand", True),
        visibility_host=_str(visibility, "bindAddress", "", "visibilityServer."),
        visibility_port=_int(visibility, "bindPort", 8082, "visibilityServer.", minimum=0),
        internal_cert_management=_bool(certs, "enable", True, "internalCertManagement."),
        webhook_service_name=_str(certs, "webhookServiceName", "kadmit-webhook-service",
                                  "internalCertManagement."),
        webhook_secret_name=_str(certs, "webhookSecretName", "kadmit-webhook-server-cert",
                                 "internalCertManagement."),
        wait_for_pods_ready=(None if gates.get("DisableWaitForPodsReady")
                             else _wait_for_pods_ready(document, v1beta1)),
        frameworks=frameworks,
        label_keys_to_copy=tuple(_str_list(integrations, "integrations.labelKeysToCopy")),
        external_frameworks=_external_frameworks(integrations, frameworks),
        pod_namespace_selector=_selector(pod_options, "namespaceSelector", "integrations.podOptions.")
        if pod_options is not None and pod_options.get("namespaceSelector") is not None
        else (default_namespace_selector(namespace) if pod_options is not None else None),
        pod_selector=_selector(pod_options or {}, "podSelector", "integrations.podOptions."),
        fair_sharing_strategies=_fair_sharing(document, v1beta1),
        admission_fair_sharing=(
            _admission_fair_sharing(document) if gates.get("AdmissionFairSharing", True) else None
        ),
        resource_transformations=_resources(_block(document, "resources")),
        delete_finished_workloads_after=_retention(document, "afterFinished"),
        delete_deactivated_workloads_after=_retention(document, "afterDeactivatedByKueue"),
        partial_admission=gates.get("PartialAdmission", True),
        concurrent_admission=gates.get("ConcurrentAdmission", False),
        multikueue_dispatcher=dispatcher,
        client_qps=_client_qps(client_connection),
        client_burst=_int(client_connection, "burst", DEFAULT_CLIENT_BURST, "clientConnection.", minimum=1),
        group_kind_concurrency=_group_kind_concurrency(controller),
        cache_sync_timeout=(
            _duration(controller, "cacheSyncTimeout", DEFAULT_CACHE_SYNC_TIMEOUT, "controller.")
            or DEFAULT_CACHE_SYNC_TIMEOUT
        ),
        admission_checks=admission_checks,
        tls=_tls(_block(document, "tls")),
        ignored_fields=tuple(ignored),
        document=document,
    )


def _selector(obj: Mapping[str, Any], name: str, prefix: str) -> Mapping[str, Any] | None:
    value = obj.get(name)
    if value is not None and not isinstance(value, dict):
        raise ConfigError(f"{prefix}{name}: must be a label selector")
    return value


def _check_fields(obj: Mapping[str, Any], schema: Mapping[str, Any], prefix: str, ignored: list[str]) -> None:
    for name, value in obj.items():
        path = prefix + name
        if name not in schema:
            raise ConfigError(f"unknown field {path!r}")
        if path in IGNORED_FIELDS:
            ignored.append(path)
            continue
        sub = schema[name]
        if sub is not None and value is not None:
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: must be an object")
            _check_fields(value, sub, path + ".", ignored)


def _block(obj: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    value = obj.get(path.rsplit(".", 1)[-1])
    return value if isinstance(value, dict) else {}


def _typed(obj: Mapping[str, Any], name: str, default: T, prefix: str, accept: Callable[[Any], bool],
           expected: str) -> T:
    """The field ``name`` if ``accept`` takes it, ``default`` if it is absent, else a ConfigError."""
    value = obj.get(name)
    if value is None:
        return default
    if not accept(value):
        raise ConfigError(f"{prefix}{name}: must be {expected}")
    return cast(T, value)


def _str(obj: Mapping[str, Any], name: str, default: str, prefix: str = "") -> str:
    return _typed(obj, name, default, prefix, lambda v: isinstance(v, str), "a string")


def _bool(obj: Mapping[str, Any], name: str, default: bool, prefix: str = "") -> bool:
    return _typed(obj, name, default, prefix, lambda v: isinstance(v, bool), "true or false")


def _int(obj: Mapping[str, Any], name: str, default: int, prefix: str = "", minimum: int = 0) -> int:
    def accept(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= minimum

    return _typed(obj, name, default, prefix, accept, f"an integer >= {minimum}")


def _optional_int(obj: Mapping[str, Any], name: str, prefix: str) -> int | None:
    return None if obj.get(name) is None else _int(obj, name, 0, prefix)


def _duration(obj: Mapping[str, Any], name: str, default: float, prefix: str = "") -> float:
    value = obj.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ConfigError(f"{prefix}{name}: must be a duration such as 30s or 5m")
    try:
        seconds = durationpy.from_str(value).total_seconds()
    except Exception as exc:
        raise ConfigError(f"{prefix}{name}: invalid duration {value!r}") from exc
    if seconds < 0:
        raise ConfigError(f"{prefix}{name}: must not be negative")
    return float(seconds)


def _str_list(obj: Mapping[str, Any], path: str) -> list[str]:
    value = obj.get(path.rsplit(".", 1)[-1])
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: must be a list of strings")
    return list(value)


def _external_frameworks(integrations: Mapping[str, Any],
                         frameworks: Iterable[str]) -> tuple[tuple[str, str, str], ...]:
    """``integrations.externalFrameworks``: ``Kind.version.group`` of kinds whose Workloads another
    controller (an out-of-tree integration) creates, as Kueue's ``schema.ParseKindArg`` reads them;
    each only once, and none an enabled framework's."""
    path = "integrations.externalFrameworks"
    enabled = {_framework_group_kind(f) for f in frameworks}
    found: list[tuple[str, str, str]] = []
    for index, entry in enumerate(_str_list(integrations, path)):
        if entry.count(".") < 2:
            raise ConfigError(
                f"{path}[{index}]: Invalid value: {entry!r}: must be format, 'Kind.version.group.com'"
            )
        kind, version, group = entry.split(".", 2)
        if (group, version, kind) in found or (group, kind.lower()) in enabled:
            raise ConfigError(f"{path}[{index}]: Duplicate value: {entry!r}")
        found.append((group, version, kind))
    return tuple(found)


def _framework_group_kind(framework: str) -> tuple[str, str]:
    """An integration name's API group and lower-case kind: ``batch/job`` -> (batch, job)."""
    if "/" in framework:
        group, _, kind = framework.partition("/")
        return group, kind
    return ("", framework) if framework == "pod" else ("apps", framework)


def _group_kind_concurrency(block: Mapping[str, Any]) -> dict[str, int]:
    """``controller.groupKindConcurrency``: workers per kind, keyed ``Kind.group`` as Kueue's are;
    zero or less leaves kadmit's default, as controller-runtime does with such a value."""
    value = block.get("groupKindConcurrency")
    if value is None:
        return {}
    path = "controller.groupKindConcurrency"
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: must map Kind.group to a number of workers")
    chosen: dict[str, int] = {}
    for key, count in value.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{path}: keys must be Kind.group names such as Job.batch")
        if not isinstance(count, int) or isinstance(count, bool):
            raise ConfigError(f"{path}.{key}: must be an integer")
        if count > 0:
            chosen[key] = count
    return chosen


def _client_qps(block: Mapping[str, Any]) -> float | None:
    """``clientConnection.qps``: above zero, requests a second; zero, negative or absent, no limit.

    Kueue reads an absent or zero qps as its default (300) and a negative one as no limit; kadmit
    leaves its client unlimited unless a limit is asked for, as controller-runtime does since 0.21
    (the API server's priority and fairness protect it either way)."""
    value = block.get("qps")
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ConfigError("clientConnection.qps: must be a number")
    return float(value) if value > 0 else None


def _leader_election(block: Mapping[str, Any], namespace: str) -> LeaderElection:
    p = "leaderElection."
    leader_elect = _bool(block, "leaderElect", True, p)
    durations = (
        _duration(block, "leaseDuration", DEFAULT_TIMING.lease_duration, p),
        _duration(block, "renewDeadline", DEFAULT_TIMING.renew_deadline, p),
        _duration(block, "retryPeriod", DEFAULT_TIMING.retry_period, p),
    )
    resource_name = _str(block, "resourceName", LeaderElection.resource_name, p)
    resource_namespace = _str(block, "resourceNamespace", namespace, p)
    try:
        result = LeaderElection(*durations, leader_elect=leader_elect, resource_name=resource_name,
                                resource_namespace=resource_namespace)
    except ValueError:  # LeaseTiming's rule, in the Configuration's words
        raise ConfigError("leaderElection: need retryPeriod < renewDeadline < leaseDuration") from None
    # controller-runtime's only lock since the ConfigMap and Endpoints locks were removed.
    if _str(block, "resourceLock", "leases", p) != "leases":
        raise ConfigError(f"{p}resourceLock: only leases is supported, got {block['resourceLock']!r}")
    return result


def _wait_for_pods_ready(document: Mapping[str, Any], v1beta1: bool) -> WaitForPodsReady | None:
    block = document.get("waitForPodsReady", None if v1beta1 else {})
    if v1beta1:
        # v1beta1: the block means nothing unless enable is true; unset blockAdmission means true,
        # and an unset timeout 5m (Kueue's conversion).
        if not isinstance(block, dict) or not _bool(block, "enable", False, "waitForPodsReady."):
            return None
        default_timeout, default_block = 300.0, True
    else:
        if block is None:
            block = {}
        if "enable" in block:
            raise ConfigError("waitForPodsReady.enable: not a v1beta2 field "
                              "(the block's presence enables it)")
        default_timeout, default_block = 1800.0, False
    p = "waitForPodsReady."
    timeout = _duration(block, "timeout", default_timeout, p)
    recovery = _duration(block, "recoveryTimeout", timeout, p)
    strategy = _block(block, "requeuingStrategy")
    q = p + "requeuingStrategy."
    timestamp = _str(strategy, "timestamp", "Eviction", q)
    if timestamp not in ("Eviction", "Creation"):
        raise ConfigError(f"{q}timestamp: must be Eviction or Creation, not {timestamp!r}")
    return WaitForPodsReady(
        timeout=timeout,
        recovery_timeout=recovery or None,
        block_admission=_bool(block, "blockAdmission", default_block, p),
        requeuing_strategy=RequeuingStrategy(
            timestamp=timestamp,
            backoff_limit_count=_optional_int(strategy, "backoffLimitCount", q),
            backoff_base_seconds=_int(strategy, "backoffBaseSeconds", 60, q),
            backoff_max_seconds=_int(strategy, "backoffMaxSeconds", 3600, q),
        ),
    )


def _resources(block: Mapping[str, Any]) -> ResourceTransformations | None:
    """``resources.excludeResourcePrefixes`` and ``resources.transformations`` as the engine
    applies them (Kueue's validation: a strategy is Retain, the default, or Replace; an input
    is transformed once)."""
    prefixes = _str_list(block, "resources.excludeResourcePrefixes")
    raw = block.get("transformations") or []
    if not isinstance(raw, list):
        raise ConfigError("resources.transformations: must be a list")
    transformations = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        path = f"resources.transformations[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: must be an object")
        unknown = sorted(set(entry) - {"input", "strategy", "outputs", "multiplyBy"})
        if unknown:
            raise ConfigError(f"{path}.{unknown[0]}: unknown field")
        name = entry.get("input")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{path}.input: Required value")
        if name in seen:
            raise ConfigError(f'{path}.input: Duplicate value: "{name}"')
        seen.add(name)
        strategy = entry.get("strategy", RETAIN)
        if strategy not in STRATEGIES:
            raise ConfigError(f'{path}.strategy: Unsupported value: "{strategy}": '
                              'supported values: "Retain", "Replace"')
        multiply_by = entry.get("multiplyBy", "")
        if not isinstance(multiply_by, str):
            raise ConfigError(f"{path}.multiplyBy: must be a resource name")
        outputs = entry.get("outputs") or {}
        if not isinstance(outputs, dict):
            raise ConfigError(f"{path}.outputs: must map resource names to quantities")
        per_unit = {}
        for output, quantity in outputs.items():
            try:
                per_unit[str(output)] = parse_exact(quantity)
            except QuantityError as exc:
                raise ConfigError(f"{path}.outputs.{output}: {exc}") from None
        transformations.append(ResourceTransformation(name, per_unit, strategy, multiply_by))
    rules = ResourceTransformations(prefixes, transformations)
    return rules if rules else None


def _retention(document: Mapping[str, Any], name: str) -> float | None:
    """``objectRetentionPolicies.workloads.<name>``: None (absent) keeps the objects."""
    workloads = _block(_block(document, "objectRetentionPolicies"), "objectRetentionPolicies.workloads")
    if workloads.get(name) is None:
        return None
    return _duration(workloads, name, 0.0, "objectRetentionPolicies.workloads.")


def _admission_fair_sharing(document: Mapping[str, Any]) -> AdmissionFairSharing | None:
    """``admissionFairSharing`` (its presence enables it, with the feature gate on: Kueue's Beta
    default); ``usageSamplingInterval`` defaults to 5m, ``usageHalfLifeTime`` to 0 (no memory)."""
    block = document.get("admissionFairSharing")
    if block is None:
        return None
    if not isinstance(block, dict):
        raise ConfigError("admissionFairSharing: must be an object")
    p = "admissionFairSharing."
    interval = _duration(block, "usageSamplingInterval", DEFAULT_SAMPLING_INTERVAL, p)
    if interval <= 0:
        raise ConfigError("admissionFairSharing.usageSamplingInterval: must be greater than 0")
    weights = block.get("resourceWeights") or {}
    if not isinstance(weights, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in weights.values()
    ):
        raise ConfigError("admissionFairSharing.resourceWeights: must map resource names to numbers")
    for name, weight in weights.items():
        if weight < 0:
            raise ConfigError(f"admissionFairSharing.resourceWeights.{name}: must not be negative")
    return AdmissionFairSharing(
        usage_half_life=_duration(block, "usageHalfLifeTime", 0.0, p),
        sampling_interval=interval,
        resource_weights={str(k): float(v) for k, v in weights.items()},
    )


def _fair_sharing(document: Mapping[str, Any], v1beta1: bool) -> tuple[str, ...] | None:
    block = document.get("fairSharing")
    if block is None:
        return None
    if not isinstance(block, dict):
        raise ConfigError("fairSharing: must be an object")
    if v1beta1 and not _bool(block, "enable", False, "fairSharing."):
        return None
    if not v1beta1 and "enable" in block:
        raise ConfigError("fairSharing.enable: not a v1beta2 field (the block's presence enables it)")
    strategies = tuple(_str_list(block, "fairSharing.preemptionStrategies")) or PREEMPTION_STRATEGY_SETS[0]
    if strategies not in PREEMPTION_STRATEGY_SETS:
        raise ConfigError("fairSharing.preemptionStrategies: must be one of "
                          + "; ".join(str(list(s)) for s in PREEMPTION_STRATEGY_SETS))
    return strategies



def _tls(block: Mapping[str, Any]) -> TLSOptions:
    """``tls``, validated as Kueue's ParseTLSOptions and validateTLS do (an absent or empty
    ``minVersion`` is TLS 1.2); ``curvePreferences`` is checked too, though it has no effect."""
    p = "tls."
    name = _str(block, "minVersion", "", p) or "VersionTLS12"
    if name in ("VersionTLS10", "VersionTLS11"):
        raise ConfigError(f"{p}minVersion: {name} is not allowed; use VersionTLS12 or VersionTLS13")
    if name not in TLS_VERSIONS:
        raise ConfigError(f"{p}minVersion: unknown tls version {name!r}; use VersionTLS12 or VersionTLS13")
    suites = _str_list(block, "tls.cipherSuites")
    for suite in suites:
        if suite not in GO_CIPHER_SUITES:
            raise ConfigError(f"{p}cipherSuites: cipher suite {suite} not supported or doesn't exist "
                              f"(use Go's names, such as {', '.join(SECURE_CIPHER_SUITES)})")
    if name == "VersionTLS13" and suites:
        # Kueue's words: TLS 1.3 suites are not configurable, so a list would mean nothing.
        raise ConfigError(f"{p}cipherSuites: may not be specified when `minVersion` is 'VersionTLS13'")
    missing = unavailable_suites(suites)
    if missing and len(missing) == sum(GO_CIPHER_SUITES[s] is not None for s in suites):
        raise ConfigError(f"{p}cipherSuites: this Python's {ssl.OPENSSL_VERSION} has none of the TLS 1.2 "
                          f"suites listed ({', '.join(missing)})")
    for suite in missing:
        logger.warning("tls.cipherSuites: %s is not offered: this Python's %s does not have it",
                       suite, ssl.OPENSSL_VERSION)
    _curve_preferences(block.get("curvePreferences"))
    return TLSOptions(TLS_VERSIONS[name], tuple(s for s in suites if s not in missing))


def _curve_preferences(value: Any) -> None:
    """Kueue refuses what k8s.io/component-base's TLSCurvePreferences refuses; so does kadmit."""
    if value is None:
        return
    p = "tls.curvePreferences"
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ConfigError(f"{p}: must be a list of integers (IANA TLS supported group IDs)")
    for i, curve in enumerate(value):
        if not 0 < curve <= 65535:
            raise ConfigError(f"{p}: curve preference {curve} is out of range (must be 1-65535)")
        if curve in value[:i]:
            raise ConfigError(f"{p}: duplicate curve preference {curve}")
        if curve not in GO_CURVE_IDS:
            raise ConfigError(f"{p}: curve preference {curve} is not supported by the Go Kueue is built with "
                              f"(supported: {', '.join(map(str, GO_CURVE_IDS))})")


def _multikueue_dispatcher(document: Mapping[str, Any], ignored: list[str]) -> str:
    """The dispatcher, once the block is valid for the multikueue check plugin that reads it."""
    block = document.get("multiKueue")
    if block is None:
        return ALL_AT_ONCE
    if not isinstance(block, dict):
        raise ConfigError("multiKueue: must be an object")
    try:
        settings = settings_from_config(document)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    ignored.extend(f"multiKueue.{name}" for name in block if name not in MULTIKUEUE_CONFIG_FIELDS)
    return settings.dispatcher


def _admission_checks(block: Mapping[str, Any]) -> AdmissionCheckPlugins:
    """Names checked against the installed plugins, so that a typo stops kadmit at start."""
    from kadmit.checks.discovery import available

    if "enabled" in block and "disabled" in block:
        raise ConfigError("admissionChecks: set enabled or disabled, not both")
    installed = available()
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("enabled", "disabled"):
        if block.get(key) is None:
            continue
        names = _str_list(block, f"admissionChecks.{key}")
        for name in names:
            if name not in installed:
                known = ", ".join(sorted(installed)) or "none"
                raise ConfigError(f"admissionChecks.{key}: no admission-check plugin named {name!r} "
                                  f"(installed: {known})")
            if names.count(name) > 1:
                raise ConfigError(f"admissionChecks.{key}: {name!r} is listed twice")
        lists[key] = tuple(names)
    settings = block.get("settings") or {}
    if not isinstance(settings, dict):
        raise ConfigError("admissionChecks.settings: must map plugin names to their settings")
    for name, value in settings.items():
        if name not in installed:
            known = ", ".join(sorted(installed)) or "none"
            raise ConfigError(f"admissionChecks.settings: no admission-check plugin named {name!r} "
                              f"(installed: {known})")
        if not isinstance(value, dict):
            raise ConfigError(f"admissionChecks.settings.{name}: must be an object")
    return AdmissionCheckPlugins(enabled=lists.get("enabled"), disabled=lists.get("disabled", ()))
