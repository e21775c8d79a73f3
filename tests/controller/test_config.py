"""Kueue's Configuration file: defaults, v1beta1 conversion, the supported subset, clear errors."""

from __future__ import annotations

import logging
import re
import ssl
from pathlib import Path

import pytest

from kadmit.controller.config import ConfigError, Configuration, load
from kadmit.webhook.tls import TLSOptions, unavailable_suites


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_no_file_gives_kueue_defaults() -> None:
    config = load(None)
    assert config == Configuration()
    assert config.wait_for_pods_ready is not None  # on by default since Kueue v0.19
    assert config.wait_for_pods_ready.timeout == 1800
    assert config.wait_for_pods_ready.recovery_timeout == 1800
    assert config.wait_for_pods_ready.block_admission is False
    assert config.wait_for_pods_ready.requeuing_strategy.backoff_base_seconds == 60
    assert config.managed_jobs_namespace_selector == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
         "values": ["kube-system", "kadmit-system"]}]}
    assert config.frameworks == ("batch/job",)
    assert config.fair_sharing_strategies is None
    assert config.metrics_bind_address == ":8080"
    assert config.health_probe_bind_address == ":8081"


def test_v1beta2_file_as_kueue_ships_it(tmp_path: Path) -> None:
    config = load(write(tmp_path, """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: batch-system
health:
  healthProbeBindAddress: :9081
metrics:
  bindAddress: :9080
  enableClusterQueueResources: true
webhook:
  port: 9444
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
manageJobsWithoutQueueName: true
waitForPodsReady:
  timeout: 5m
  recoveryTimeout: 0s
  blockAdmission: true
  requeuingStrategy:
    timestamp: Creation
    backoffLimitCount: 3
    backoffBaseSeconds: 10
    backoffMaxSeconds: 100
integrations:
  frameworks: [batch/job, jobset.x-k8s.io/jobset]
  labelKeysToCopy: [team]
fairSharing:
  preemptionStrategies: [LessThanInitialShare]
"""))
    assert config.namespace == "batch-system"
    assert config.managed_jobs_namespace_selector["matchExpressions"][0]["values"] == [  # type: ignore[index]
        "kube-system", "batch-system"]
    assert config.health_probe_bind_address == ":9081"
    assert config.metrics_bind_address == ":9080" and config.enable_cluster_queue_resources
    assert config.webhook_port == 9444
    assert config.leader_election.resource_name == "c1f6bfd2.kueue.x-k8s.io"
    assert config.leader_election.resource_namespace == "batch-system"
    assert config.manage_jobs_without_queue_name
    wfpr = config.wait_for_pods_ready
    assert wfpr is not None
    assert (wfpr.timeout, wfpr.recovery_timeout, wfpr.block_admission) == (300, None, True)
    assert wfpr.requeuing_strategy.timestamp == "Creation"
    assert wfpr.requeuing_strategy.backoff_limit_count == 3
    strategy = wfpr.requeuing_strategy
    assert (strategy.backoff_base_seconds, strategy.backoff_max_seconds) == (10, 100)
    assert config.frameworks == ("batch/job", "jobset.x-k8s.io/jobset")
    assert config.label_keys_to_copy == ("team",)
    assert config.fair_sharing_strategies == ("LessThanInitialShare",)


def test_v1beta1_conversion_rules(tmp_path: Path) -> None:
    disabled = load(write(tmp_path, """
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady: {enable: false, timeout: 1m}
fairSharing: {enable: false}
"""))
    assert disabled.wait_for_pods_ready is None and disabled.fair_sharing_strategies is None
    absent = load(write(tmp_path, "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"))
    assert absent.wait_for_pods_ready is None  # v1beta1 never enabled it by default
    enabled = load(write(tmp_path, """
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady: {enable: true}
fairSharing: {enable: true}
"""))
    assert enabled.wait_for_pods_ready is not None
    assert enabled.wait_for_pods_ready.block_admission is True  # unset in v1beta1 means true
    assert enabled.wait_for_pods_ready.timeout == 300
    assert enabled.fair_sharing_strategies == ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


def test_admission_fair_sharing(tmp_path: Path) -> None:
    config = load(write(tmp_path, """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
admissionFairSharing:
  usageHalfLifeTime: 168h
  usageSamplingInterval: 5m
  resourceWeights: {cpu: 2.0, nvidia.com/gpu: 10}
"""))
    afs = config.admission_fair_sharing
    assert afs is not None and "admissionFairSharing" not in config.ignored_fields
    assert afs.usage_half_life == 168 * 3600 and afs.sampling_interval == 300
    assert afs.resource_weights == {"cpu": 2.0, "nvidia.com/gpu": 10.0}
    defaulted = load(write(tmp_path, "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                                     "admissionFairSharing: {}\n"))
    assert defaulted.admission_fair_sharing is not None
    assert defaulted.admission_fair_sharing.sampling_interval == 300  # Kueue's default, 5m
    assert defaulted.admission_fair_sharing.usage_half_life == 0
    gated = load(write(tmp_path, "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                                 "featureGates: {AdmissionFairSharing: false}\nadmissionFairSharing: {}\n"))
    assert gated.admission_fair_sharing is None and not gated.ignored_fields
    absent = load(write(tmp_path, "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"))
    assert absent.admission_fair_sharing is None


def test_resources_block_excludes_and_transforms(tmp_path: Path) -> None:
    config = load(write(tmp_path, """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  excludeResourcePrefixes: [example.com/]
  transformations:
  - input: cpu
    outputs: {cpu_credits: "1"}
  - input: nvidia.com/gpu
    strategy: Replace
    multiplyBy: cpu
    outputs: {gpu-units: 500m}
  quotaCheckStrategy: BlockUndeclared
"""))
    rules = config.resource_transformations
    assert rules is not None and config.ignored_fields == ("resources.quotaCheckStrategy",)
    requests = {"cpu": 2000, "nvidia.com/gpu": 3000, "example.com/nic": 1000, "memory": 5000}
    assert rules.apply(requests) == {"cpu": 2000, "cpu_credits": 2000, "gpu-units": 3000, "memory": 5000}
    assert load(write(tmp_path, "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                                "resources: {}\n")).resource_transformations is None


def test_disable_wait_for_pods_ready_gate(tmp_path: Path) -> None:
    config = load(write(tmp_path, """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates: {DisableWaitForPodsReady: true}
"""))
    assert config.wait_for_pods_ready is None


def test_concurrent_admission_gate_is_off_by_default_and_honoured(tmp_path: Path) -> None:
    assert Configuration().concurrent_admission is False  # Alpha in Kueue: off
    config = load(write(tmp_path, """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates: {ConcurrentAdmission: true}
"""))
    assert config.concurrent_admission is True
    assert config.ignored_fields == ()


def test_fields_without_effect_are_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = load(write(tmp_path, """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
pprofBindAddress: ":6060"
featureGates: {TopologyAwareScheduling: false}
"""))
    assert config.ignored_fields == ("pprofBindAddress", "featureGates.TopologyAwareScheduling")
    assert "pprofBindAddress" in caplog.text and "no effect" in caplog.text


HEADER = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


@pytest.mark.parametrize(("block", "qps", "burst"), [
    ("", None, 500),  # absent: no client-side limit
    ("clientConnection: {qps: 50, burst: 100}", 50.0, 100),
    ("clientConnection: {qps: 20.5}", 20.5, 500),  # Kueue's default burst
    ("clientConnection: {qps: -1, burst: 100}", None, 100),  # negative: no limit, as in Kueue
    ("clientConnection: {qps: 0}", None, 500),
])
def test_client_connection_sets_the_clients_token_bucket(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, block: str, qps: float | None, burst: int
) -> None:
    with caplog.at_level(logging.WARNING):
        config = load(write(tmp_path, f"{HEADER}{block}\n"))
    assert (config.client_qps, config.client_burst) == (qps, burst)
    assert config.ignored_fields == () and "no effect" not in caplog.text
    limiter = config.client_rate_limiter()
    if qps is None:
        assert limiter is None
    else:
        assert limiter is not None and (limiter.qps, limiter.burst) == (qps, burst)


@pytest.mark.parametrize(("block", "message"), [
    ("clientConnection: {qps: fast}", "clientConnection.qps: must be a number"),
    ("clientConnection: {qps: .inf}", "clientConnection.qps: must be a number"),
    ("clientConnection: {qps: 10, burst: 0}", "clientConnection.burst: must be an integer >= 1"),
    ("clientConnection: {qps: 10, burst: 2.5}", "clientConnection.burst: must be an integer >= 1"),
    ("clientConnection: {qpsLimit: 10}", "clientConnection.qpsLimit"),
    ("controller: {groupKindConcurrency: [Job.batch]}", "groupKindConcurrency: must map Kind.group"),
    ("controller: {groupKindConcurrency: {Job.batch: many}}", "groupKindConcurrency.Job.batch: must be"),
    ("controller: {workers: 3}", "controller.workers"),
    ("controller: {cacheSyncTimeout: -1s}", "controller.cacheSyncTimeout: must not be negative"),
])
def test_a_bad_client_connection_or_controller_block_is_one_clear_error(
    tmp_path: Path, block: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load(write(tmp_path, f"{HEADER}{block}\n"))


TLS13 = ssl.TLSVersion.TLSv1_3
GCM, CHACHA = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305"  # Go's names
V1BETA1 = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"


@pytest.mark.parametrize(("text", "expected"), [
    (HEADER, TLSOptions()),  # absent: TLS 1.2 and up, the default suites, as before
    (f"{HEADER}tls: {{}}", TLSOptions()),
    (f"{HEADER}tls: {{minVersion: ''}}", TLSOptions()),  # Kueue: empty is VersionTLS12
    (f"{HEADER}tls: {{minVersion: VersionTLS12, cipherSuites: []}}", TLSOptions()),
    (f"{HEADER}tls: {{minVersion: VersionTLS13}}", TLSOptions(TLS13)),
    (f"{V1BETA1}tls: {{minVersion: VersionTLS13}}", TLSOptions(TLS13)),  # the same field in v1beta1
    (f"{HEADER}tls: {{cipherSuites: [{GCM}, {CHACHA}]}}", TLSOptions(cipher_suites=(GCM, CHACHA))),
    # a TLS 1.3 suite is a name Kueue accepts, though it cannot be chosen (in Go as here)
    (f"{HEADER}tls: {{minVersion: VersionTLS12, cipherSuites: [TLS_AES_128_GCM_SHA256]}}",
     TLSOptions(cipher_suites=("TLS_AES_128_GCM_SHA256",))),
])
def test_the_tls_block_as_kueue_reads_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, expected: TLSOptions
) -> None:
    with caplog.at_level(logging.WARNING):
        config = load(write(tmp_path, text + "\n"))
    assert config.tls == expected
    assert config.ignored_fields == () and "no effect" not in caplog.text


def test_tls_curve_preferences_are_checked_as_kueue_does_but_have_no_effect(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Python's ssl module sets one curve at most (set_ecdh_curve), not a preference list."""
    with caplog.at_level(logging.WARNING):
        text = f"{HEADER}tls: {{minVersion: VersionTLS13, curvePreferences: [23, 29]}}"
        config = load(write(tmp_path, text))
    assert config.tls == TLSOptions(TLS13)
    assert config.ignored_fields == ("tls.curvePreferences",)
    assert "tls.curvePreferences" in caplog.text and "no effect" in caplog.text


@pytest.mark.parametrize(("block", "message"), [
    ("tls: VersionTLS13", "tls: must be an object"),
    ("tls: {minVersion: VersionTLS11}",
     "tls.minVersion: VersionTLS11 is not allowed; use VersionTLS12 or VersionTLS13"),
    ("tls: {minVersion: VersionTLS10}", "tls.minVersion: VersionTLS10 is not allowed"),
    ("tls: {minVersion: TLS13}",
     "tls.minVersion: unknown tls version 'TLS13'; use VersionTLS12 or VersionTLS13"),
    ("tls: {minVersion: 1.3}", "tls.minVersion: must be a string"),
    ("tls: {maxVersion: VersionTLS13}", "unknown field 'tls.maxVersion'"),
    (f"tls: {{cipherSuites: {GCM}}}", "tls.cipherSuites: must be a list of strings"),
    ("tls: {cipherSuites: [ECDHE-RSA-AES128-GCM-SHA256]}",  # OpenSSL's name, not Go's
     "tls.cipherSuites: cipher suite ECDHE-RSA-AES128-GCM-SHA256 not supported or doesn't exist "
     "(use Go's names, such as TLS_AES_128_GCM_SHA256, "),
    ("tls: {minVersion: VersionTLS13, cipherSuites: [TLS_AES_128_GCM_SHA256]}",
     "tls.cipherSuites: may not be specified when `minVersion` is 'VersionTLS13'"),
    ("tls: {curvePreferences: [X25519]}", "tls.curvePreferences: must be a list of integers"),
    ("tls: {curvePreferences: [0]}",
     "tls.curvePreferences: curve preference 0 is out of range (must be 1-65535)"),
    ("tls: {curvePreferences: [65536]}", "tls.curvePreferences: curve preference 65536 is out of range"),
    ("tls: {curvePreferences: [23, 29, 23]}", "tls.curvePreferences: duplicate curve preference 23"),
    ("tls: {curvePreferences: [22]}", "tls.curvePreferences: curve preference 22 is not supported by the Go"),
])
def test_a_bad_tls_block_is_one_clear_error(tmp_path: Path, block: str, message: str) -> None:
    path = write(tmp_path, f"{HEADER}{block}\n")
    with pytest.raises(ConfigError) as exc:
        load(path)
    assert str(exc.value).startswith(f"config {path}: {message}")
    assert "\n" not in str(exc.value)


RC4 = "TLS_RSA_WITH_RC4_128_SHA"


@pytest.mark.skipif(not unavailable_suites([RC4]), reason="this OpenSSL still has RC4")
def test_tls_suites_this_openssl_lacks(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Kueue (Go) would serve RC4 when asked; kadmit cannot: a warning, or an error when no
    TLS 1.2 suite listed is left, rather than silently serving something else."""
    with caplog.at_level(logging.WARNING):
        config = load(write(tmp_path, f"{HEADER}tls: {{cipherSuites: [{RC4}, {GCM}]}}"))
    assert config.tls.cipher_suites == (GCM,)
    assert f"{RC4} is not offered" in caplog.text
    with pytest.raises(ConfigError) as exc:
        load(write(tmp_path, f"{HEADER}tls: {{cipherSuites: [{RC4}, TLS_AES_128_GCM_SHA256]}}"))
    assert re.search(rf"tls.cipherSuites: this Python's .* has none of the TLS 1.2 suites listed \({RC4}\)$",
                     str(exc.value))


@pytest.mark.parametrize(("text", "message"), [
    ("apiVersion: v1\nkind: ConfigMap\n", "expected apiVersion config.kueue.x-k8s.io/v1beta2"),
    ("apiVersion: config.kueue.x-k8s.io/v1alpha1\nkind: Configuration\n", "unsupported apiVersion"),
    ("- a\n", "expected a Configuration object"),
    ("key: [unclosed\n", "invalid YAML at line 2"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nkind: Configuration\n",
     'line 3: duplicate field "kind" (first at line 2)'),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n---\nkind: Configuration\n",
     "line 4: expected one Configuration document"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmanageJobsWithoutQueueNames: true\n",
     "unknown field 'manageJobsWithoutQueueNames'"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady: {timeout: soon}\n",
     "waitForPodsReady.timeout: invalid duration 'soon'"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady: {enable: true}\n",
     "waitForPodsReady.enable: not a v1beta2 field"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwebhook: {port: '9443'}\n",
     "webhook.port: must be an integer"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
     "integrations: {frameworks: [example.com/widget]}\n",
     "'example.com/widget' is not supported"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
     "fairSharing: {preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]}\n",
     "fairSharing.preemptionStrategies: must be one of"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nleaderElection: {leaseDuration: 1s}\n",
     "retryPeriod < renewDeadline < leaseDuration"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
     "waitForPodsReady: {requeuingStrategy: {timestamp: Now}}\n", "must be Eviction or Creation"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
     "admissionFairSharing: {usageSamplingInterval: 0s}\n",
     "admissionFairSharing.usageSamplingInterval: must be greater than 0"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
     "admissionFairSharing: {usageHalfLifeTime: -1s}\n",
     "admissionFairSharing.usageHalfLifeTime: must not be"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
     "admissionFairSharing: {resourceWeights: {cpu: -1}}\n",
     "admissionFairSharing.resourceWeights.cpu: must not be negative"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
     "admissionFairSharing: {usageHalfLife: 1m}\n", "admissionFairSharing.usageHalfLife"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
     "resources: {transformations: [{input: cpu, strategy: Drop}]}\n",
     'resources.transformations[0].strategy: Unsupported value: "Drop"'),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
     "resources: {transformations: [{input: cpu}, {input: cpu}]}\n",
     'resources.transformations[1].input: Duplicate value: "cpu"'),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
     "resources: {transformations: [{input: cpu, outputs: {credits: lots}}]}\n",
     "resources.transformations[0].outputs.credits:"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
     "resources: {excludeResourcePrefixes: example.com/}\n",
     "resources.excludeResourcePrefixes: must be a list of strings"),
])
def test_bad_files_get_one_clear_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load(path)
    assert message in str(exc.value)
    assert str(exc.value).startswith(f"config {path}: ")
    assert "\n" not in str(exc.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No such file"):
        load(tmp_path / "absent.yaml")


def test_workload_retention(tmp_path: Path) -> None:
    config = load(write(tmp_path, """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
objectRetentionPolicies:
  workloads: {afterFinished: 10m, afterDeactivatedByKueue: 1h}
"""))
    assert config.delete_finished_workloads_after == 600
    assert config.delete_deactivated_workloads_after == 3600
    assert config.ignored_fields == ()
    assert load(None).delete_finished_workloads_after is None
    assert load(None).delete_deactivated_workloads_after is None
    with pytest.raises(ConfigError, match="afterDeactivatedByKueue: must not be negative"):
        retention = "objectRetentionPolicies: {workloads: {afterDeactivatedByKueue: -1s}}"
        load(write(tmp_path, f"{HEADER}{retention}\n"))


def test_the_pod_framework_and_its_pod_options(tmp_path: Path) -> None:
    config = load(
        write(
            tmp_path,
            """
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
namespace: kadmit-system
integrations:
  frameworks: [batch/job, pod]
  podOptions:
    namespaceSelector: {matchLabels: {team: ml}}
    podSelector: {matchExpressions: [{key: kueue-job, operator: In, values: ["true"]}]}
""",
        )
    )
    assert config.frameworks == ("batch/job", "pod")
    assert config.pod_namespace_selector == {"matchLabels": {"team": "ml"}}
    assert config.pod_selector == {
        "matchExpressions": [{"key": "kueue-job", "operator": "In", "values": ["true"]}]
    }
    assert "integrations.podOptions" not in config.ignored_fields
    # podOptions without a namespace selector keeps Kueue's default: not kube-system, not kadmit's own
    defaulted = load(
        write(
            tmp_path,
            """
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
integrations: {frameworks: [pod], podOptions: {}}
""",
        )
    )
    assert defaulted.pod_namespace_selector == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kadmit-system"],
            }
        ]
    }
    assert (
        load(
            write(tmp_path, "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n")
        ).pod_namespace_selector
        is None
    )


def test_group_kind_concurrency_sets_each_reconcilers_workers(tmp_path: Path) -> None:
    config = load(write(tmp_path, HEADER + """controller:
  groupKindConcurrency:
    Job.batch: 7
    Pod: 3
    Workload.kueue.x-k8s.io: 9
    Cohort.kueue.x-k8s.io: 0
  cacheSyncTimeout: 2m
"""))
    assert config.group_kind_concurrency == {"Job.batch": 7, "Pod": 3, "Workload.kueue.x-k8s.io": 9}
    assert (config.concurrency("Job", "batch", 4), config.concurrency("Pod", "", 4)) == (7, 3)
    assert config.concurrency("JobSet", "jobset.x-k8s.io", 4) == 4  # not named: kadmit's default
    assert config.concurrency("Cohort", "kueue.x-k8s.io", 1) == 1  # zero: the default, as controller-runtime
    assert config.ignored_fields == ()
    assert config.cache_sync_timeout == 120  # 2m
    assert load(None).cache_sync_timeout == 120  # controller-runtime's default
    assert load(write(tmp_path, HEADER + "controller: {cacheSyncTimeout: 0s}\n")).cache_sync_timeout == 120
    assert load(write(tmp_path, HEADER + "controller: {cacheSyncTimeout: 30s}\n")).cache_sync_timeout == 30


def test_the_leader_election_lock_is_a_lease(tmp_path: Path) -> None:
    config = load(write(tmp_path, HEADER + "leaderElection: {resourceLock: leases}\n"))
    assert config.ignored_fields == ()
    message = "leaderElection.resourceLock: only leases is supported, got 'configmaps'"
    with pytest.raises(ConfigError, match=re.escape(message)):
        load(write(tmp_path, HEADER + "leaderElection: {resourceLock: configmaps}\n"))


def test_external_frameworks_are_kinds_another_controller_integrates(tmp_path: Path) -> None:
    config = load(write(tmp_path, HEADER + """integrations:
  frameworks: [batch/job]
  externalFrameworks: [AppWrapper.v1beta2.workload.codeflare.dev, ConfigMap.v1.]
"""))
    assert config.external_frameworks == (
        ("workload.codeflare.dev", "v1beta2", "AppWrapper"), ("", "v1", "ConfigMap"),
    )
    assert config.ignored_fields == ()


@pytest.mark.parametrize(("entries", "message"), [
    ("[Job.batch]", "integrations.externalFrameworks[0]: Invalid value: 'Job.batch': must be format"),
    ("[Foo.v1.example.com, Foo.v1.example.com]", "integrations.externalFrameworks[1]: Duplicate value"),
    ("[Job.v1.batch]", "integrations.externalFrameworks[0]: Duplicate value: 'Job.v1.batch'"),  # batch/job's
])
def test_a_bad_external_framework_is_one_clear_error(tmp_path: Path, entries: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        block = f"integrations: {{frameworks: [batch/job], externalFrameworks: {entries}}}"
        load(write(tmp_path, f"{HEADER}{block}\n"))


@pytest.mark.parametrize("framework", ["ray.io/rayservice", "sparkoperator.k8s.io/sparkapplication"])
def test_a_kueue_framework_kadmit_lacks_is_refused_saying_so(tmp_path: Path, framework: str) -> None:
    """Kueue's shipped configuration lists ray.io/rayservice: the error says what it is, rather
    than calling it unknown, and kadmit does not start leaving that kind outside every quota."""
    message = f"integrations.frameworks: '{framework}' is Kueue's but kadmit does not integrate it yet"
    with pytest.raises(ConfigError, match=re.escape(message)):
        load(write(tmp_path, f"{HEADER}integrations: {{frameworks: [batch/job, {framework}]}}\n"))
