"""Routing a webhook's ``clientConfig.service`` as kube-apiserver does with endpoint routing.

A webhook server in another process has no Python callback to tell the API server where it
listens; on a real cluster the API server finds out from the store, and so does this one
(``k8s.io/apiserver/pkg/util/proxy.ResolveEndpoint``): the Service's port whose ``port`` is the
one the webhook names, then the port of the same *name* in the Service's Endpoints, at one of
their addresses. On a cluster the endpoints controller writes those Endpoints from the Service's
``targetPort`` (a number, or a container port's name) and the ready pods; the local cluster runs
no such controller, so whoever serves the webhook writes its Endpoints, with the port number it
listens on (``kadmit local`` does, for kadmit's webhook Service). The webhook client still
verifies TLS against ``<name>.<namespace>.svc``.
"""

from __future__ import annotations

import random

from kadmit.localcluster.interfaces import StoreView

# The Service types whose Endpoints the API server may call (an ExternalName has none).
ROUTABLE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")


class UnresolvableService(LookupError):
    """A webhook's ``clientConfig.service`` has no address (the call fails as a real one would)."""


class EndpointsResolver:
    """``(namespace, name, port) -> (host, port)`` from the stored Service and Endpoints.

    Errors are LookupErrors worded as kube-apiserver words them, because the webhook client
    quotes them after ``Post "https://<name>.<namespace>.svc:<port>/...": ``.
    """

    def __init__(self, store: StoreView, choose: random.Random | None = None) -> None:
        self.store = store
        self._random = choose or random.Random()

    def __call__(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        service = self.store.get("", "services", namespace, name)
        if service is None:
            raise UnresolvableService(f'service "{name}" not found')
        spec = service.get("spec") or {}
        service_type = spec.get("type") or "ClusterIP"
        if service_type not in ROUTABLE_TYPES:
            raise UnresolvableService(f'unsupported service type "{service_type}"')
        service_port = next(
            (p for p in spec.get("ports") or [] if isinstance(p, dict) and p.get("port") == port), None
        )
        if service_port is None:
            raise UnresolvableService(f'no service port {port} found for service "{name}"')
        port_name = service_port.get("name") or ""
        endpoints = self.store.get("", "endpoints", namespace, name)
        if endpoints is None:
            raise UnresolvableService(f'endpoints "{name}" not found')
        subsets = [s for s in endpoints.get("subsets") or [] if isinstance(s, dict)]
        if not subsets:
            raise UnresolvableService(f'no endpoints available for service "{name}"')
        start = self._random.randrange(len(subsets))  # as the real one: a random subset first
        for offset in range(len(subsets)):
            subset = subsets[(start + offset) % len(subsets)]
            addresses = [a for a in subset.get("addresses") or [] if isinstance(a, dict) and a.get("ip")]
            if not addresses:
                continue  # only notReadyAddresses, or none
            for endpoint_port in subset.get("ports") or []:
                if not isinstance(endpoint_port, dict) or not isinstance(endpoint_port.get("port"), int):
                    continue
                if (endpoint_port.get("name") or "") == port_name:
                    address = self._random.choice(addresses)
                    return str(address["ip"]), endpoint_port["port"]
        raise UnresolvableService(f'no endpoints available for service "{name}"')
