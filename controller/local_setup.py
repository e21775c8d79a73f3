"""Bringing up kadmit on the embedded cluster: what ``kadmit local`` installs, in which order.

1. the API server with simulated nodes, kube-scheduler, kubelets and Job controller;
2. Kueue's CRDs and JobSet's, from ``manifests/`` (with their ``/convert`` webhook);
3. the ``kadmit-system`` namespace and kadmit's ServiceAccount, then kadmit itself, on a token
   of that ServiceAccount (so webhooks see it as ``system:serviceaccount:kadmit-system:
   kadmit-controller-manager``, not as the user): caches, loops, and its HTTPS webhook server,
   whose certificate it issues into a Secret and whose CA it injects;
4. kadmit's webhook configurations from ``manifests/base/webhooks.yaml``, then a wait until the
   webhooks are trusted, so the first Job a user creates is already suspended by kadmit;
5. unless told not to, the sample queues of ``manifests/samples/local-setup.yaml``.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
from collections.abc import Callable
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from kadmit.controller.apply import Applier, load_documents
from kadmit.controller.config import Configuration, LeaderElection
from kadmit.kube import ApiError, Client, Obj, Resource
from kadmit.kube.resources import NAMESPACES

# Package data (kadmit/manifests links the repository's manifests/): found the same way in a
# checkout, an editable install and a wheel, from any working directory.
MANIFESTS: Traversable = resources.files("kadmit") / "manifests"
SAMPLES = MANIFESTS / "samples" / "local-setup.yaml"
WEBHOOKS = MANIFESTS / "base" / "webhooks.yaml"
POOL_LABEL = "kadmit.dev/pool"
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts")
# kadmit's ServiceAccount, as manifests/base/serviceaccount.yaml names it.
CONTROLLER_SERVICE_ACCOUNT = "kadmit-controller-manager"
JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
# The user the local cluster's admin token authenticates as (the user's kubeconfig). Tests that
# run kadmit on that same kubeconfig pass it as kadmit's controller_username.
LOCAL_USERNAME = "system:admin"


def controller_username(namespace: str) -> str:
    """The username kadmit's ServiceAccount token authenticates as, which the Job webhook trusts."""
    return f"system:serviceaccount:{namespace}:{CONTROLLER_SERVICE_ACCOUNT}"


def labelled_pools(config: Any) -> Any:
    """The node pools with ``kadmit.dev/pool=<pool>``, the label the sample flavors select."""
    pools = tuple(dataclasses.replace(p, labels={POOL_LABEL: p.name, **p.labels}) for p in config.pools)
    return dataclasses.replace(config, pools=pools)


@functools.cache
def crd_documents() -> tuple[Obj, ...]:
    paths = [path for folder in ("crds", "third-party")
             for path in sorted((MANIFESTS / folder).iterdir(), key=lambda p: p.name)
             if "_" in path.name and path.name.endswith(".yaml")]
    return tuple(doc for path in paths for doc in load_documents(path))


def local_configuration(config: Configuration, *, manage_jobsets: bool = True) -> Configuration:
    """One process on one machine: no leader election; and, unless the user's own configuration
    chose the frameworks (``manage_jobsets=False``), JobSets are managed, since the local cluster
    always serves them (the CRD installed here, the simulated JobSet controller)."""
    frameworks = config.frameworks
    if manage_jobsets and JOBSET_FRAMEWORK not in frameworks:
        frameworks = (*frameworks, JOBSET_FRAMEWORK)
    return dataclasses.replace(
        config, leader_election=LeaderElection(leader_elect=False), frameworks=frameworks
    )


async def install_crds(kube: Client) -> None:
    await Applier(kube).apply_all(copy.deepcopy(list(crd_documents())))


async def ensure_namespace(kube: Client, name: str) -> None:
    body: Obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    await _create_if_absent(kube, NAMESPACES, body)


async def ensure_service_account(kube: Client, namespace: str,
                                 name: str = CONTROLLER_SERVICE_ACCOUNT) -> None:
    """Create kadmit's ServiceAccount, so its token's uid and ``kubectl get sa`` match a real install."""
    metadata = {"name": name, "namespace": namespace}
    body: Obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata}
    await _create_if_absent(kube, SERVICE_ACCOUNTS, body)


async def _create_if_absent(kube: Client, resource: Resource, body: Obj) -> None:
    try:
        await kube.create(resource, body)
    except ApiError as exc:
        if exc.status != 409:
            raise


async def install_webhooks(kube: Client, namespace: str, service: str) -> None:
    docs = load_documents(WEBHOOKS)
    for doc in docs:
        for hook in doc.get("webhooks") or []:
            ref = (hook.get("clientConfig") or {}).get("service") or {}
            if ref:
                ref["namespace"], ref["name"] = namespace, service
    await Applier(kube).apply_all(docs)


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
