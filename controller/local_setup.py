"""Bringing up kadmit on the embedded cluster: what ``kadmit local`` installs, in which order.

1. the API server with simulated nodes, kube-scheduler, kubelets and Job controller, in a
   process of its own (``python -m kadmit.localcluster``), which kadmit reaches over HTTPS only;
2. Kueue's CRDs and the third-party ones (JobSet, LeaderWorkerSet, the Kubeflow jobs), from
   ``manifests/`` (with their ``/convert`` webhook);
3. the ``kadmit-system`` namespace, kadmit's ServiceAccount and its RBAC exactly as
   ``manifests/base/rbac.yaml`` has it (the local API server enforces RBAC), with the user roles
   of ``manifests/base/user-roles.yaml``; then kadmit itself, on a token of that ServiceAccount
   got from the TokenRequest API (so webhooks see it as
   ``system:serviceaccount:kadmit-system:kadmit-controller-manager``, not as the user): caches,
   loops, and its HTTPS webhook server, whose certificate it issues into a Secret and whose CA it
   injects;
4. kadmit's webhook Service from ``manifests/base/services.yaml`` and Endpoints that route it to
   kadmit's webhook port on 127.0.0.1, as a cluster's endpoints controller routes it to a pod;
   then the webhook configurations from ``manifests/base/webhooks.yaml``, and a wait until the
   webhooks are trusted, so the first Job a user creates is already suspended by kadmit; the
   same for the visibility Service and the APIServices of ``manifests/base/visibility.yaml``;
5. unless told not to, the sample queues of ``manifests/samples/local-setup.yaml``.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
from collections.abc import Callable, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import yaml

from kadmit.controller.apply import Applier, load_documents
from kadmit.controller.config import Configuration, LeaderElection
from kadmit.kube import ApiError, Client, Obj, Resource, copy_object
from kadmit.kube.resources import NAMESPACES, SERVICE_ACCOUNTS

# Package data (kadmit/manifests links the repository's manifests/): found the same way in a
# checkout, an editable install and a wheel, from any working directory.
MANIFESTS: Traversable = resources.files("kadmit") / "manifests"
SAMPLES = MANIFESTS / "samples" / "local-setup.yaml"
WEBHOOKS = MANIFESTS / "base" / "webhooks.yaml"
SERVICES = MANIFESTS / "base" / "services.yaml"
VISIBILITY = MANIFESTS / "base" / "visibility.yaml"
RBAC = MANIFESTS / "base" / "rbac.yaml"
USER_ROLES = MANIFESTS / "base" / "user-roles.yaml"
MANIFEST_NAMESPACE = "kadmit-system"  # the namespace manifests/base installs into
POOL_LABEL = "kadmit.dev/pool"
# kadmit's ServiceAccount, as manifests/base/serviceaccount.yaml names it.
CONTROLLER_SERVICE_ACCOUNT = "kadmit-controller-manager"
JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
POD_FRAMEWORK = "pod"
#: The webhooks (in manifests/base/webhooks.yaml) of each optional integration: a local cluster
#: without it need not call them (the Pod ones on every Pod it creates).
FRAMEWORK_WEBHOOKS = {
    "pod": ("mpod.kb.io", "vpod.kb.io"),
    "deployment": ("mdeployment.kb.io", "vdeployment.kb.io"),
    "statefulset": ("mstatefulset.kb.io", "vstatefulset.kb.io"),
    "leaderworkerset.x-k8s.io/leaderworkerset": ("mleaderworkerset.kb.io", "vleaderworkerset.kb.io"),
}
# what kadmit local adds to batch/job: the kinds its simulated controllers run
LOCAL_FRAMEWORKS = (
    JOBSET_FRAMEWORK,
    POD_FRAMEWORK,
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/jaxjob",
    "kubeflow.org/mpijob",
    "trainer.kubeflow.org/trainjob",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "workload.codeflare.dev/appwrapper",
)
# How long kadmit's ServiceAccount token is asked to last: the local cluster does not expire
# tokens, and kadmit local does not renew it, so it asks for the longest a token may have.
TOKEN_SECONDS = 1 << 32
# The user the local cluster's admin token authenticates as (the user's kubeconfig). Tests that
# run kadmit on that same kubeconfig pass it as kadmit's controller_username.
LOCAL_USERNAME = "system:admin"


def controller_username(namespace: str) -> str:
    """The username kadmit's ServiceAccount token authenticates as, which the Job webhook trusts."""
    return f"system:serviceaccount:{namespace}:{CONTROLLER_SERVICE_ACCOUNT}"


@functools.cache
def crd_documents() -> tuple[Obj, ...]:
    paths = [
        path
        for folder in ("crds", "third-party")
        for path in sorted((MANIFESTS / folder).iterdir(), key=lambda p: p.name)
        if "_" in path.name and path.name.endswith(".yaml")
    ]
    return tuple(doc for path in paths for doc in load_documents(path))


def local_configuration(config: Configuration, *, manage_jobsets: bool = True) -> Configuration:
    """One process on one machine: no leader election; the visibility server on a free port of
    the loopback (only the local API server calls it, through its Service's Endpoints); and,
    unless the user's own configuration chose the frameworks (``manage_jobsets=False``), the kinds
    the local cluster always runs are managed too, as Kueue's shipped configuration manages them:
    JobSets, LeaderWorkerSets and the Kubeflow jobs (their CRDs installed here, their simulated
    controllers), Deployments, StatefulSets, and plain Pods and pod groups."""
    frameworks = config.frameworks
    if manage_jobsets:
        frameworks = (*frameworks, *(f for f in LOCAL_FRAMEWORKS if f not in frameworks))
    return on_loopback(dataclasses.replace(config, leader_election=LeaderElection(leader_elect=False),
                                           frameworks=frameworks))


def on_loopback(config: Configuration, *, metrics: bool = True, health: bool = True) -> Configuration:
    """``config`` with every server of kadmit's on 127.0.0.1 and a free port (``metrics`` and
    ``health`` off when False): kadmit beside a local API server, which alone may reach it."""
    return dataclasses.replace(
        config,
        webhook_host="127.0.0.1",
        webhook_port=0,
        visibility_host="127.0.0.1",
        visibility_port=0,
        metrics_bind_address="127.0.0.1:0" if metrics else "0",
        health_probe_bind_address="127.0.0.1:0" if health else "0",
    )


async def install_crds(kube: Client) -> None:
    await Applier(kube).apply_all([copy_object(doc) for doc in crd_documents()])


async def ensure_namespace(kube: Client, name: str) -> None:
    body: Obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    await _create_if_absent(kube, NAMESPACES, body)


async def ensure_service_account(
    kube: Client, namespace: str, name: str = CONTROLLER_SERVICE_ACCOUNT
) -> None:
    """Create kadmit's ServiceAccount, so its token's uid and ``kubectl get sa`` match a real install."""
    metadata = {"name": name, "namespace": namespace}
    body: Obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata}
    await _create_if_absent(kube, SERVICE_ACCOUNTS, body)


def rbac_documents(namespace: str) -> list[Obj]:
    """kadmit's Roles, ClusterRoles and bindings from ``manifests/base`` (the manager's, the
    metrics auth and reader roles, the user roles), moved from ``kadmit-system`` to ``namespace``
    as ``kustomize edit set namespace`` would move them."""
    # The visibility server's binding to the front proxy's CA in kube-system comes with it.
    visibility_rbac = [d for d in load_documents(VISIBILITY) if d["kind"] in ("Role", "RoleBinding")]
    docs = load_documents(RBAC) + load_documents(USER_ROLES) + visibility_rbac
    for doc in docs:
        if doc["metadata"].get("namespace") == MANIFEST_NAMESPACE:
            doc["metadata"]["namespace"] = namespace
        for subject in doc.get("subjects") or []:
            if subject.get("namespace") == MANIFEST_NAMESPACE:
                subject["namespace"] = namespace
    return docs


async def install_rbac(kube: Client, namespace: str) -> None:
    """Bind kadmit's ServiceAccount to exactly the manifests' roles, and install the user roles."""
    await Applier(kube).apply_all(rbac_documents(namespace))


async def _create_if_absent(kube: Client, resource: Resource, body: Obj) -> None:
    try:
        await kube.create(resource, body)
    except ApiError as exc:
        if exc.status != 409:
            raise


async def install_webhooks(
    kube: Client, namespace: str, service: str, frameworks: Sequence[str] | None = None
) -> None:
    """kadmit's webhook configurations, calling ``service`` in ``namespace``; given the enabled
    ``frameworks``, without the webhooks of optional integrations that are off (a local cluster
    then never calls kadmit for every Pod it creates unless the pod integration is on)."""
    docs = load_documents(WEBHOOKS)
    pods_needed = frameworks is None or any(
        f in frameworks
        for f in ("pod", "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset")
    )
    skipped = {
        name
        for framework, names in FRAMEWORK_WEBHOOKS.items()
        if frameworks is not None and framework not in frameworks and not (framework == "pod" and pods_needed)
        for name in names
    }
    for doc in docs:
        doc["webhooks"] = [h for h in doc.get("webhooks") or [] if h.get("name") not in skipped]
        for hook in doc.get("webhooks") or []:
            ref = (hook.get("clientConfig") or {}).get("service") or {}
            if ref:
                ref["namespace"], ref["name"] = namespace, service
    await Applier(kube).apply_all(docs)


def webhook_service(namespace: str, name: str) -> Obj:
    """kadmit's webhook Service as ``manifests/base/services.yaml`` has it (the one the webhook
    configurations call), in ``namespace`` as ``name``, without its pod selector: no pod backs it
    here, so its Endpoints are written by hand, as for any Service without a selector."""
    called = {
        str(hook["clientConfig"]["service"]["name"])
        for doc in load_documents(WEBHOOKS)
        for hook in doc.get("webhooks") or []
        if (hook.get("clientConfig") or {}).get("service")
    }
    [service] = [
        doc
        for doc in load_documents(SERVICES)
        if doc["kind"] == "Service" and doc["metadata"]["name"] in called
    ]
    service["metadata"].update(namespace=namespace, name=name)
    service["spec"].pop("selector", None)
    return service


def endpoints_for(service: Obj, address: str, port: int) -> Obj:
    """The Endpoints an endpoints controller would write for ``service`` served at ``address:port``:
    each of the Service's ports, under its name, at that port (the API server matches by name)."""
    ports = [
        {"name": p.get("name", ""), "port": port, "protocol": p.get("protocol", "TCP")}
        for p in service["spec"]["ports"]
    ]
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": service["metadata"]["name"], "namespace": service["metadata"]["namespace"]},
        "subsets": [{"addresses": [{"ip": address}], "ports": ports}],
    }


async def route_webhook_service(kube: Client, namespace: str, name: str, port: int) -> None:
    """Create kadmit's webhook Service and route it to ``127.0.0.1:port``, so the API server, in
    its own process, calls kadmit's webhooks and conversions the way a cluster's does."""
    service = webhook_service(namespace, name)
    await Applier(kube).apply_all([service, endpoints_for(service, "127.0.0.1", port)])


def visibility_objects(namespace: str) -> tuple[Obj, list[Obj]]:
    """The visibility Service and the APIServices of ``manifests/base/visibility.yaml``, moved
    to ``namespace``; the Service without its pod selector (its Endpoints are written by hand)."""
    docs = load_documents(VISIBILITY)
    [service] = [doc for doc in docs if doc["kind"] == "Service"]
    service["metadata"]["namespace"] = namespace
    service["spec"].pop("selector", None)
    apiservices = [doc for doc in docs if doc["kind"] == "APIService"]
    for apiservice in apiservices:
        apiservice["spec"]["service"]["namespace"] = namespace
    return service, apiservices


async def install_visibility(kube: Client, namespace: str, port: int) -> None:
    """Route kadmit's visibility Service to ``127.0.0.1:port`` and register the APIServices, so
    the API server proxies ``/apis/visibility.kueue.x-k8s.io/...`` to kadmit, as a cluster's does."""
    service, apiservices = visibility_objects(namespace)
    await Applier(kube).apply_all([service, endpoints_for(service, "127.0.0.1", port), *apiservices])


async def service_account_token(
    kube: Client, namespace: str, name: str = CONTROLLER_SERVICE_ACCOUNT, seconds: int = TOKEN_SECONDS
) -> str:
    """A token of the ServiceAccount, from the TokenRequest API (``kubectl create token``)."""
    request: Obj = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }
    answer = await kube.request("POST", SERVICE_ACCOUNTS.path(namespace, name, "token"), body=request)
    return str(answer["status"]["token"])


def kubeconfig_with_token(path: str | Path, token: str) -> Obj:
    """The kubeconfig at ``path`` (one user, as the local cluster writes it) with ``token`` as
    that user's credential: the same server and CA, another identity."""
    config: Obj = yaml.safe_load(Path(path).read_text())
    for user in config.get("users") or []:
        user["user"] = {"token": token}
    return config


async def install_samples(kube: Client, path: Traversable = SAMPLES) -> list[Obj]:
    return await Applier(kube).apply_all(load_documents(path))


def webhook_resolver(
    service: tuple[str, str], port: Callable[[], int]
) -> Callable[[str, str, int], tuple[str, int]]:
    """Send the API server's calls for kadmit's Service to the local webhook server's port."""

    def resolve(namespace: str, name: str, _port: int) -> tuple[str, int]:
        if (namespace, name) != service:
            raise LookupError(f'service "{name}" in namespace "{namespace}" has no local address')
        return "127.0.0.1", port()

    return resolve


async def wait_until(check: Callable[[], bool]) -> None:
    """Until ``check()`` (in-memory flags; bound it with ``asyncio.timeout``)."""
    while not check():  # noqa: ASYNC110
        await asyncio.sleep(0.05)


MULTIKUEUE_SAMPLES = MANIFESTS / "samples" / "multikueue-local.yaml"
MULTIKUEUE_CONFIG = "multikueue"  # the MultiKueueConfig multikueue-local.yaml's AdmissionCheck names


def multikueue_documents(namespace: str, workers: dict[str, str]) -> list[Obj]:
    """What connects the manager to its workers (``workers``: name → kubeconfig text): a Secret
    holding each kubeconfig under ``kubeconfig`` in kadmit's namespace, a MultiKueueCluster
    reading it, and the MultiKueueConfig listing them all."""
    docs: list[Obj] = []
    for name, kubeconfig in workers.items():
        secret = f"{name}-kubeconfig"
        docs.append({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": secret, "namespace": namespace},
            "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()},
        })
        docs.append({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}},
        })
    docs.append({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
        "metadata": {"name": MULTIKUEUE_CONFIG},
        "spec": {"clusters": list(workers)},
    })
    return docs


async def install_multikueue(kube: Client, namespace: str, workers: dict[str, str], *, samples: bool) -> None:
    """The manager's MultiKueue setup; its queues too (``multikueue-local.yaml``) unless ``samples``
    is False."""
    docs = multikueue_documents(namespace, workers)
    if samples:
        docs += load_documents(MULTIKUEUE_SAMPLES)
    await Applier(kube).apply_all(docs)
