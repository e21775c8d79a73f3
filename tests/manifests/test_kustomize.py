"""``kubectl kustomize`` builds the bundle and the cert-manager overlay offline."""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.manifests.conftest import MANIFESTS, parse_documents

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
CONVERTING_CRDS = {
    f"{plural}.kueue.x-k8s.io"
    for plural in ("clusterqueues", "localqueues", "cohorts", "workloads", "multikueueclusters")
}
INJECT = "cert-manager.io/inject-ca-from"


def build(path: str) -> list[dict[str, Any]]:
    """``kubectl kustomize manifests/<path>``, parsed (built once per session)."""
    return copy.deepcopy(_build(path))


@functools.cache
def _build(path: str) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    result = subprocess.run(
        [KUBECTL, "kustomize", str(MANIFESTS / path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return parse_documents(result.stdout)


@pytest.fixture(scope="module")
def bundle() -> list[dict[str, Any]]:
    return build(".")


@pytest.fixture(scope="module")
def cert_manager() -> list[dict[str, Any]]:
    return build("overlays/cert-manager")


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matching = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matching) == 1, f"{kind}/{name}: {len(matching)} found"
    return matching[0]


def test_bundle_has_crds_and_deployment(bundle: list[dict[str, Any]]) -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in bundle)
    crds = {name for kind, name in kinds if kind == "CustomResourceDefinition"}
    assert len({n for n in crds if n.endswith(".kueue.x-k8s.io")}) == 11
    for kind, name in [
        ("Namespace", "kadmit-system"),
        ("ServiceAccount", "kadmit-controller-manager"),
        ("Deployment", "kadmit-controller-manager"),
        ("Service", "kadmit-webhook-service"),
        ("Service", "kadmit-controller-manager-metrics-service"),
        ("ConfigMap", "kadmit-manager-config"),
        ("PodDisruptionBudget", "kadmit-controller-manager"),
        ("MutatingWebhookConfiguration", "kadmit-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "kadmit-validating-webhook-configuration"),
        ("APIService", "v1beta2.visibility.kueue.x-k8s.io"),
        ("APIService", "v1beta1.visibility.kueue.x-k8s.io"),
        ("Service", "kadmit-visibility-server"),
        ("ClusterRole", "kadmit-pending-workloads-cq-viewer-role"),
        ("ClusterRole", "kadmit-pending-workloads-lq-viewer-role"),
    ]:
        assert (kind, name) in kinds
    for doc in bundle:
        if doc["kind"] in ("ServiceAccount", "Deployment", "Service", "ConfigMap", "Role", "RoleBinding"):
            # Kueue's visibility-server-auth-reader binding lives where its Role is: kube-system.
            expected = "kube-system" if doc["metadata"]["name"].endswith("-auth-reader") else "kadmit-system"
            assert doc["metadata"]["namespace"] == expected, doc["metadata"]["name"]
    for apiservice in (d for d in bundle if d["kind"] == "APIService"):
        assert apiservice["spec"]["service"] == {
            "name": "kadmit-visibility-server",
            "namespace": "kadmit-system",
        }
        assert apiservice["spec"]["insecureSkipTLSVerify"] is True  # as Kueue ships it


def test_deployment(bundle: list[dict[str, Any]]) -> None:
    deployment = one(bundle, "Deployment", "kadmit-controller-manager")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "kadmit-controller-manager"
    (container,) = pod["containers"]
    assert container["command"] + container["args"] == [
        "kadmit",
        "run",
        "--config",
        "/etc/kadmit/config.yaml",
    ]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"webhook-server": 9443, "metrics": 8443, "health": 8081, "visibility": 8082}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    security = container["securityContext"]
    assert security["runAsNonRoot"] and security["readOnlyRootFilesystem"]
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["allowPrivilegeEscalation"] is False
    assert container["resources"]["requests"] and container["resources"]["limits"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/etc/kadmit"] == "config"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "kadmit-manager-config"
    # Services and the PDB select these pods.
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    for kind, name in [
        ("Service", "kadmit-webhook-service"),
        ("Service", "kadmit-controller-manager-metrics-service"),
    ]:
        assert one(bundle, kind, name)["spec"]["selector"].items() <= labels.items()
    pdb = one(bundle, "PodDisruptionBudget", "kadmit-controller-manager")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_webhook_service_routes_443_to_the_webhook_port(bundle: list[dict[str, Any]]) -> None:
    (port,) = one(bundle, "Service", "kadmit-webhook-service")["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (443, "webhook-server")


def test_configuration_is_kueue_format(bundle: list[dict[str, Any]]) -> None:
    config = yaml.safe_load(one(bundle, "ConfigMap", "kadmit-manager-config")["data"]["config.yaml"])
    assert (config["apiVersion"], config["kind"]) == ("config.kueue.x-k8s.io/v1beta2", "Configuration")
    assert config["namespace"] == "kadmit-system"
    assert config["manageJobsWithoutQueueName"] is False
    assert config["integrations"]["frameworks"] == ["batch/job", "jobset.x-k8s.io/jobset"]
    assert "waitForPodsReady" in config
    assert config["internalCertManagement"] == {
        "enable": True,
        "webhookServiceName": "kadmit-webhook-service",
        "webhookSecretName": "kadmit-webhook-server-cert",
    }
    assert config["health"]["healthProbeBindAddress"] == ":8081"
    assert config["metrics"]["bindAddress"] == ":8443"


def test_cert_manager_overlay(cert_manager: list[dict[str, Any]], bundle: list[dict[str, Any]]) -> None:
    certificate = one(cert_manager, "Certificate", "kadmit-serving-cert")
    assert certificate["spec"]["secretName"] == "kadmit-webhook-server-cert"
    assert set(certificate["spec"]["dnsNames"]) == {
        "kadmit-webhook-service.kadmit-system.svc",
        "kadmit-webhook-service.kadmit-system.svc.cluster.local",
    }
    issuer = one(cert_manager, "Issuer", certificate["spec"]["issuerRef"]["name"])
    assert issuer["metadata"]["namespace"] == "kadmit-system"

    injected = {
        (d["kind"], d["metadata"]["name"])
        for d in cert_manager
        if d["metadata"].get("annotations", {}).get(INJECT) == "kadmit-system/kadmit-serving-cert"
    }
    assert injected == {
        ("MutatingWebhookConfiguration", "kadmit-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "kadmit-validating-webhook-configuration"),
    } | {("CustomResourceDefinition", name) for name in CONVERTING_CRDS}

    pod = one(cert_manager, "Deployment", "kadmit-controller-manager")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[args.index("--cert-mode") + 1] == "files"
    assert args[args.index("--cert-dir") + 1] == "/tmp/k8s-webhook-server/serving-certs"
    mount = next(
        m for m in container["volumeMounts"] if m["mountPath"] == "/tmp/k8s-webhook-server/serving-certs"
    )
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "kadmit-webhook-server-cert"

    config = yaml.safe_load(one(cert_manager, "ConfigMap", "kadmit-manager-config")["data"]["config.yaml"])
    base = yaml.safe_load(one(bundle, "ConfigMap", "kadmit-manager-config")["data"]["config.yaml"])
    assert config["internalCertManagement"] == {"enable": False}
    # Apart from certificate management the overlay's configuration is the base's.
    assert {k: v for k, v in config.items() if k != "internalCertManagement"} == {
        k: v for k, v in base.items() if k != "internalCertManagement"
    }
    # Everything else is the base bundle plus the Issuer and the Certificate.
    names = {(d["kind"], d["metadata"]["name"]) for d in cert_manager}
    assert names == {(d["kind"], d["metadata"]["name"]) for d in bundle} | {
        ("Issuer", issuer["metadata"]["name"]),
        ("Certificate", "kadmit-serving-cert"),
    }


def test_third_party_builds() -> None:
    names = [crd["metadata"]["name"] for crd in build("third-party")]
    kubeflow = ["jaxjobs", "mpijobs", "paddlejobs", "pytorchjobs", "tfjobs", "xgboostjobs"]
    assert sorted(names) == sorted(
        ["jobsets.jobset.x-k8s.io", "leaderworkersets.leaderworkerset.x-k8s.io"]
        + ["inferenceservices.serving.kserve.io", "pipelineruns.tekton.dev", "pipelines.tekton.dev"]
        + ["tasks.tekton.dev"]
        + [f"{plural}.kubeflow.org" for plural in kubeflow]
        + [f"{p}.trainer.kubeflow.org" for p in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")]
        + ["appwrappers.workload.codeflare.dev", "rayclusters.ray.io", "rayjobs.ray.io"]
    )


def _command_line(docs: list[dict[str, Any]]) -> list[str]:
    pod = one(docs, "Deployment", "kadmit-controller-manager")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command: list[str] = container["command"] + container["args"]
    return command


@pytest.mark.parametrize("overlay", [".", "overlays/cert-manager"])
def test_kadmit_accepts_the_deployments_command_line_and_configuration(overlay: str, tmp_path: Any) -> None:
    """What the Deployment runs is a command line and a configuration kadmit itself accepts."""
    cli = pytest.importorskip("kadmit.controller.cli")
    config = pytest.importorskip("kadmit.controller.config")
    docs = build(overlay)
    command = _command_line(docs)
    assert command[:2] == ["kadmit", "run"]
    args, unknown = cli.build_parser().parse_known_args(command[1:])
    if unknown:
        pytest.skip(f"kadmit run does not take {unknown} yet (the webhook server's file mode)")
    config_file = tmp_path / "config.yaml"
    config_file.write_text(one(docs, "ConfigMap", "kadmit-manager-config")["data"]["config.yaml"])
    assert args.config == "/etc/kadmit/config.yaml"
    loaded = config.load(str(config_file))
    assert loaded.namespace == "kadmit-system"
    assert loaded.internal_cert_management is (overlay == ".")
    assert loaded.frameworks == ("batch/job", "jobset.x-k8s.io/jobset")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_cert_manager_overlay_keeps_the_annotations_objects_already_have(tmp_path: Any) -> None:
    """The overlay adds its annotation by strategic merge: annotations the base (or a user's fork of
    it) puts on the webhook configurations and the CRDs survive."""
    tree = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, tree, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    mine = {"example.com/owner": "platform-team"}
    for path in [tree / "base" / "webhooks.yaml", *sorted((tree / "crds").glob("*_*.yaml"))]:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for doc in docs:
            doc["metadata"]["annotations"] = {**(doc["metadata"].get("annotations") or {}), **mine}
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    assert KUBECTL is not None
    built = subprocess.run(
        [KUBECTL, "kustomize", str(tree / "overlays" / "cert-manager")],
        capture_output=True,
        text=True,
        check=True,
    )
    docs = [d for d in yaml.safe_load_all(built.stdout) if d]
    injected = [d for d in docs if INJECT in (d["metadata"].get("annotations") or {})]
    assert {
        d["metadata"]["name"] for d in injected if d["kind"] == "CustomResourceDefinition"
    } == CONVERTING_CRDS
    assert len(injected) == len(CONVERTING_CRDS) + 2
    for doc in injected:
        assert doc["metadata"]["annotations"]["example.com/owner"] == "platform-team", doc["metadata"]["name"]
