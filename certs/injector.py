"""Put the caBundle where the API server looks for it, and put it back when someone erases it.

Targets: kadmit's MutatingWebhookConfiguration and ValidatingWebhookConfiguration (found by name
and by the label ``app.kubernetes.io/name: kadmit``), and every CustomResourceDefinition whose
conversion webhook points at kadmit's Service. Within a webhook configuration only the webhooks
whose ``clientConfig.service`` is kadmit's are touched.

Each write is a JSON patch that first tests the resourceVersion it was computed from, so a
concurrent edit makes it fail rather than clobber; the watch that follows brings the next try.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger("kadmit.certs.injector")

MUTATING_NAME = "kadmit-mutating-webhook-configuration"
VALIDATING_NAME = "kadmit-validating-webhook-configuration"
LABEL_SELECTOR = "app.kubernetes.io/name=kadmit"
CONVERSION_CRDS = tuple(
    f"{plural}.kueue.x-k8s.io"
    for plural in ("clusterqueues", "localqueues", "cohorts", "workloads", "multikueueclusters")
)


@dataclass(frozen=True)
class Target:
    kind: str  # "mutating", "validating" or "crd"
    name: str


class CABundleInjector:
    """Injects one caBundle into kadmit's webhook configurations and conversion CRDs."""

    def __init__(
        self,
        api_client: client.ApiClient,
        service: str,
        namespace: str,
        names: Sequence[str] = (MUTATING_NAME, VALIDATING_NAME),
        label_selector: str = LABEL_SELECTOR,
        crds: bool = True,
        crd_names: Sequence[str] = CONVERSION_CRDS,
    ) -> None:
        self.admission = client.AdmissionregistrationV1Api(api_client)
        self.extensions = client.ApiextensionsV1Api(api_client)
        self.service = service
        self.namespace = namespace
        self.names = frozenset(names)
        self.label_selector = label_selector
        self.crds = crds
        self.crd_names = tuple(crd_names)

    def _ours(self, client_config: Any) -> bool:
        service = getattr(client_config, "service", None)
        return service is not None and service.name == self.service and service.namespace == self.namespace

    async def _configurations(self, kind: str) -> list[Any]:
        list_call = (
            self.admission.list_mutating_webhook_configuration
            if kind == "mutating"
            else self.admission.list_validating_webhook_configuration
        )
        found: dict[str, Any] = {}
        for item in (await list_call(label_selector=self.label_selector)).items:
            found[item.metadata.name] = item
        if self.names:
            for item in (await list_call()).items:
                if item.metadata.name in self.names:
                    found[item.metadata.name] = item
        return list(found.values())

    async def inject(self, bundle: bytes) -> list[Target]:
        """Write ``bundle`` wherever it is missing or stale; returns what was patched."""
        encoded = base64.b64encode(bundle).decode()
        patched: list[Target] = []
        for kind in ("mutating", "validating"):
            for config in await self._configurations(kind):
                ops = [
                    {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": encoded}
                    for i, hook in enumerate(config.webhooks or [])
                    if self._ours(hook.client_config) and hook.client_config.ca_bundle != encoded
                ]
                if ops and await self._patch(kind, config.metadata, ops):
                    patched.append(Target(kind, config.metadata.name))
        if self.crds:
            for crd in await self._crds():
                conversion = crd.spec.conversion
                hook = getattr(conversion, "webhook", None) if conversion else None
                if conversion is None or conversion.strategy != "Webhook" or hook is None:
                    continue
                if not self._ours(hook.client_config) or hook.client_config.ca_bundle == encoded:
                    continue
                ops = [
                    {"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": encoded}
                ]
                if await self._patch("crd", crd.metadata, ops):
                    patched.append(Target("crd", crd.metadata.name))
        for target in patched:
            log.info("injected the caBundle into %s %s", target.kind, target.name)
        return patched

    async def _crds(self) -> list[Any]:
        """CRDs labelled as kadmit's, plus Kueue's conversion CRDs by name (they may predate the label).

        Listing every CRD would fetch every schema in the cluster on each pass; these two cheap
        queries find the ones that can point at kadmit's conversion webhook.
        """
        found = {
            crd.metadata.name: crd
            for crd in (
                await self.extensions.list_custom_resource_definition(label_selector=self.label_selector)
            ).items
        }
        for name in self.crd_names:
            if name in found:
                continue
            try:
                found[name] = await self.extensions.read_custom_resource_definition(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        return list(found.values())

    async def _patch(self, kind: str, metadata: Any, ops: list[dict[str, Any]]) -> bool:
        body = [{"op": "test", "path": "/metadata/resourceVersion", "value": metadata.resource_version}, *ops]
        call: Callable[..., Awaitable[Any]] = {
            "mutating": self.admission.patch_mutating_webhook_configuration,
            "validating": self.admission.patch_validating_webhook_configuration,
            "crd": self.extensions.patch_custom_resource_definition,
        }[kind]
        try:
            await call(metadata.name, body)
        except ApiException as exc:
            if exc.status in (404, 409, 422):  # gone, or changed since we read it: the watch brings a retry
                log.info("caBundle for %s %s not written (%s); will retry", kind, metadata.name, exc.status)
                return False
            raise
        return True

    async def is_injected(self, bundle: bytes) -> bool:
        """Whether every kadmit webhook found carries ``bundle`` (and at least one was found)."""
        encoded = base64.b64encode(bundle).decode()
        seen = 0
        for kind in ("mutating", "validating"):
            for config in await self._configurations(kind):
                for hook in config.webhooks or []:
                    if self._ours(hook.client_config):
                        seen += 1
                        if hook.client_config.ca_bundle != encoded:
                            return False
        return seen > 0

    async def watch(self, changed: Callable[[], None], retry_delay: float = 1.0) -> None:
        """Call ``changed`` on every event of the watched kinds, until cancelled."""
        streams: list[tuple[Callable[..., Any], dict[str, str]]] = [
            (self.admission.list_mutating_webhook_configuration, {}),
            (self.admission.list_validating_webhook_configuration, {}),
        ]
        if self.crds:
            # Only kadmit's CRDs: a watch on all of them would stream every schema in the cluster.
            streams.append(
                (self.extensions.list_custom_resource_definition, {"label_selector": self.label_selector})
            )
        await asyncio.gather(*(self._watch_one(call, query, changed, retry_delay) for call, query in streams))

    async def _watch_one(
        self,
        list_call: Callable[..., Any],
        query: dict[str, str],
        changed: Callable[[], None],
        retry_delay: float,
    ) -> None:
        while True:
            stream = watch.Watch()
            try:
                async for _event in stream.stream(list_call, timeout_seconds=300, **query):
                    changed()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a dropped or refused watch: start a new one after a pause
                log.info("watch on %s ended: %s", getattr(list_call, "__name__", list_call), exc)
                await asyncio.sleep(retry_delay)
            finally:
                stream.stop()
                await stream.close()
