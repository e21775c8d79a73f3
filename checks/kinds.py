"""The kinds of object the runner and the built-in checks read, as the API's URLs name them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import quote

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"


def rest_path(
    group: str,
    version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The API server's URL path of a collection (in ``namespace``, or cluster-wide when None), of one
    object in it, or of one of the object's subresources. The controller's ``Resource`` uses it too."""
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    if namespace is not None:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{plural}"
    if name is not None:
        base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
    return base


@dataclass(frozen=True)
class Kind:
    """One resource: ``group`` is ``""`` for the core group; ``kind`` is the object's ``kind``."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    watch_namespace: str | None = None  # watch only this namespace (see ``in_namespace``)

    def in_namespace(self, namespace: str | None) -> Kind:
        """This kind, to be watched in ``namespace`` only (a watch factory honours it); None: everywhere."""
        return replace(self, watch_namespace=namespace)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path of the collection, or of one object (and one of its subresources).

        Without ``namespace``, a kind watched in one namespace names that namespace's collection.
        """
        namespace = namespace if namespace is not None else self.watch_namespace
        return rest_path(self.group, self.version, self.plural, namespace if self.namespaced else None,
                         name, subresource)

    def __str__(self) -> str:
        return f"{self.plural}.{self.group or 'core'}"


WORKLOADS = Kind(KUEUE_GROUP, KUEUE_VERSION, "workloads", "Workload")
CLUSTER_QUEUES = Kind(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "ClusterQueue", namespaced=False)
ADMISSION_CHECKS = Kind(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", "AdmissionCheck", namespaced=False)
RESOURCE_FLAVORS = Kind(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", "ResourceFlavor", namespaced=False)
PROVISIONING_REQUEST_CONFIGS = Kind(
    KUEUE_GROUP, KUEUE_VERSION, "provisioningrequestconfigs", "ProvisioningRequestConfig", namespaced=False
)
PROVISIONING_REQUESTS = Kind("autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest")
PODS = Kind("", "v1", "pods", "Pod")
POD_TEMPLATES = Kind("", "v1", "podtemplates", "PodTemplate")
RESOURCE_QUOTAS = Kind("", "v1", "resourcequotas", "ResourceQuota")
LIMIT_RANGES = Kind("", "v1", "limitranges", "LimitRange")
