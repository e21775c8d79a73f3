"""Put the caBundle where the API server looks for it, and put it back when someone erases it.

Targets: kadmit's MutatingWebhookConfiguration and ValidatingWebhookConfiguration (found by name
and by the label ``app.kubernetes.io/name: kadmit``), and every CustomResourceDefinition whose
conversion webhook points at kadmit's Service. Within a webhook configuration only the webhooks
whose ``clientConfig.service`` is kadmit's are touched.

Each write is a JSON patch that first tests the resourceVersion it was computed from, so a
concurrent edit makes it fail rather than clobber; the watch that follows brings the next try.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kadmit.kube import Client, Informer, Obj
from kadmit.kube.errors import ApiError
from kadmit.kube.resources import (
    CUSTOM_RESOURCE_DEFINITIONS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Resource,
)

log = logging.getLogger("kadmit.certs.injector")

MUTATING_NAME = "kadmit-mutating-webhook-configuration"
VALIDATING_NAME = "kadmit-validating-webhook-configuration"
LABEL_SELECTOR = "app.kubernetes.io/name=kadmit"
CONVERSION_CRDS = tuple(
    f"{plural}.kueue.x-k8s.io"
    for plural in ("clusterqueues", "localqueues", "cohorts", "workloads", "multikueueclusters")
)
_RESOURCES: dict[str, Resource] = {
    "mutating": MUTATING_WEBHOOK_CONFIGURATIONS,
    "validating": VALIDATING_WEBHOOK_CONFIGURATIONS,
    "crd": CUSTOM_RESOURCE_DEFINITIONS,
}


@dataclass(frozen=True)
class Target:
    kind: str  # "mutating", "validating" or "crd"
    name: str


class CABundleInjector:
    """Injects one caBundle into kadmit's webhook configurations and conversion CRDs."""

    def __init__(
        self,
        client: Client,
        service: str,
        namespace: str,
        names: Sequence[str] = (MUTATING_NAME, VALIDATING_NAME),
        label_selector: str = LABEL_SELECTOR,
        crds: bool = True,
        crd_names: Sequence[str] = CONVERSION_CRDS,
    ) -> None:
        self.client = client
        self.service = service
        self.namespace = namespace
        self.names = frozenset(names)
        self.label_selector = label_selector
        self.crds = crds
        self.crd_names = tuple(crd_names)

    def _ours(self, client_config: Any) -> bool:
        service = (client_config or {}).get("service") or {}
        return bool(service) and (service.get("name"), service.get("namespace")) == (self.service,
                                                                                    self.namespace)

    async def _configurations(self, kind: str) -> list[Obj]:
        resource = _RESOURCES[kind]
        found: dict[str, Obj] = {}
        for item in (await self.client.list(resource, label_selector=self.label_selector)).get("items") or []:
            found[item["metadata"]["name"]] = item
        if self.names:
            for item in (await self.client.list(resource)).get("items") or []:
                if item["metadata"]["name"] in self.names:
                    found[item["metadata"]["name"]] = item
        return list(found.values())

    async def inject(self, bundle: bytes) -> list[Target]:
        """Write ``bundle`` wherever it is missing or stale; returns what was patched."""
        encoded = base64.b64encode(bundle).decode()
        patched: list[Target] = []
        for kind in ("mutating", "validating"):
            for config in await self._configurations(kind):
                ops = [
                    {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": encoded}
                    for i, hook in enumerate(config.get("webhooks") or [])
                    if self._ours(hook.get("clientConfig"))
                    and hook["clientConfig"].get("caBundle") != encoded
                ]
                if ops and await self._patch(kind, config["metadata"], ops):
                    patched.append(Target(kind, config["metadata"]["name"]))
        if self.crds:
            for crd in await self._crds():
                conversion = (crd.get("spec") or {}).get("conversion") or {}
                hook = conversion.get("webhook")
                if conversion.get("strategy") != "Webhook" or not hook:
                    continue
                client_config = hook.get("clientConfig") or {}
                if not self._ours(client_config) or client_config.get("caBundle") == encoded:
                    continue
                ops = [
                    {"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": encoded}
                ]
                if await self._patch("crd", crd["metadata"], ops):
                    patched.append(Target("crd", crd["metadata"]["name"]))
        for target in patched:
            log.info("injected the caBundle into %s %s", target.kind, target.name)
        return patched

    async def _crds(self) -> list[Obj]:
        """CRDs labelled as kadmit's, plus Kueue's conversion CRDs by name (they may predate the label).

        Listing every CRD would fetch every schema in the cluster on each pass; these two cheap
        queries find the ones that can point at kadmit's conversion webhook.
        """
        listed = await self.client.list(CUSTOM_RESOURCE_DEFINITIONS, label_selector=self.label_selector)
        found = {crd["metadata"]["name"]: crd for crd in listed.get("items") or []}
        for name in self.crd_names:
            if name not in found:
                crd = await self.client.get_or_none(CUSTOM_RESOURCE_DEFINITIONS, None, name)
                if crd is not None:
                    found[name] = crd
        return list(found.values())

    async def _patch(self, kind: str, metadata: Obj, ops: list[Obj]) -> bool:
        version = metadata.get("resourceVersion")
        body = [{"op": "test", "path": "/metadata/resourceVersion", "value": version}, *ops]
        try:
            await self.client.patch(_RESOURCES[kind], None, metadata["name"], body, patch_type="json")
        except ApiError as exc:
            if exc.status in (404, 409, 422):  # gone, or changed since we read it: the watch brings a retry
                log.info("caBundle for %s %s not written (%s); will retry", kind, metadata["name"],
                         exc.status)
                return False
            raise
        return True

    async def is_injected(self, bundle: bytes) -> bool:
        """Whether every kadmit webhook found carries ``bundle`` (and at least one was found)."""
        encoded = base64.b64encode(bundle).decode()
        seen = 0
        for kind in ("mutating", "validating"):
            for config in await self._configurations(kind):
                for hook in config.get("webhooks") or []:
                    if self._ours(hook.get("clientConfig")):
                        seen += 1
                        if hook["clientConfig"].get("caBundle") != encoded:
                            return False
        return seen > 0

    def informers(self) -> list[Informer]:
        """Informers whose every event may need a new injection (someone erased or replaced a bundle).

        Only kadmit's CRDs are watched: a watch on all of them would stream every schema in the cluster.
        """
        watched = [Informer(self.client, MUTATING_WEBHOOK_CONFIGURATIONS),
                   Informer(self.client, VALIDATING_WEBHOOK_CONFIGURATIONS)]
        if self.crds:
            watched.append(Informer(self.client, CUSTOM_RESOURCE_DEFINITIONS,
                                    label_selector=self.label_selector))
        return watched
