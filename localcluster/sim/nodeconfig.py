"""The simulated cluster's node pools, read from a small YAML file.

A pool is a group of identical Nodes: how many exist at start, how many the autoscaler may
grow it to, and the labels, taints and allocatable resources each of its Nodes has::

    defaultRuntime: 1s          # how long a Pod runs without the runtime annotation
    pools:
    - name: cpu
      count: 3                  # or names: [cpu-a, cpu-b]
      maxCount: 10              # the autoscaler's ceiling (default: the initial size)
      labels: {tier: standard}
      allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
    - name: gpu
      count: 1
      taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
      allocatable: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "4", pods: "110"}
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ..objects import Obj
from ..quantity import QuantityError, parse_quantity
from .duration import DurationError, parse_duration

POOL_LABEL = "localcluster.kadmit.dev/pool"
DEFAULT_RUNTIME_SECONDS = 1.0

_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_SCHEMA: Obj = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "defaultRuntime": {"type": ["string", "number"]},
        "pools": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "pattern": _NAME, "maxLength": 50},
                    "count": {"type": "integer", "minimum": 0, "maximum": 1000},
                    "names": {
                        "type": "array",
                        "items": {"type": "string", "pattern": _NAME, "maxLength": 253},
                        "uniqueItems": True,
                    },
                    "maxCount": {"type": "integer", "minimum": 0, "maximum": 1000},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "taints": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["key", "effect"],
                            "properties": {
                                "key": {"type": "string", "minLength": 1},
                                "value": {"type": "string"},
                                "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
                            },
                        },
                    },
                    "allocatable": {
                        "type": "object",
                        "additionalProperties": {"type": ["string", "number"]},
                    },
                },
            },
        },
    },
}


class NodeConfigError(ValueError):
    """A node configuration that cannot be used; the message names the offending field."""


@dataclass(frozen=True)
class NodePool:
    """Identical Nodes that start ``initial_names`` strong and may grow to ``max_count``."""

    name: str
    initial_names: tuple[str, ...]
    max_count: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    allocatable: dict[str, str] = field(default_factory=dict)

    def node(self, name: str) -> Obj:
        """The Node object a new member of this pool registers as, Ready at once."""
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            POOL_LABEL: self.name,
            **self.labels,
        }
        spec: Obj = {"taints": [dict(t) for t in self.taints]} if self.taints else {}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {
                "capacity": dict(self.allocatable),
                "allocatable": dict(self.allocatable),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                    }
                ],
                "nodeInfo": {
                    "machineID": name, "systemUUID": name, "bootID": name,
                    "kernelVersion": "6.1.0", "osImage": "localcluster", "containerRuntimeVersion": "none://0",
                    "kubeletVersion": "v1.32.0", "kubeProxyVersion": "v1.32.0",
                    "operatingSystem": "linux", "architecture": "amd64",
                },
                "addresses": [{"type": "Hostname", "address": name}],
            },
        }


@dataclass(frozen=True)
class NodeConfig:
    pools: tuple[NodePool, ...]
    default_runtime: float = DEFAULT_RUNTIME_SECONDS

    def pool(self, name: str) -> NodePool | None:
        return next((p for p in self.pools if p.name == name), None)

    def with_pool_labels(self, *keys: str) -> NodeConfig:
        """Every pool's Nodes also labelled ``<key>=<pool name>`` for each key, which a user's
        selectors can name (a ResourceFlavor's ``nodeLabels``); a pool's own labels win."""
        pools = tuple(replace(p, labels={**dict.fromkeys(keys, p.name), **p.labels}) for p in self.pools)
        return replace(self, pools=pools)


def default_config() -> NodeConfig:
    """A CPU pool and a GPU pool, the GPU Nodes tainted as clouds taint them."""
    return NodeConfig(
        pools=(
            NodePool(
                name="cpu",
                initial_names=tuple(f"cpu-{i}" for i in range(3)),
                max_count=10,
                labels={"node.kubernetes.io/instance-type": "standard-8"},
                allocatable={"cpu": "8", "memory": "32Gi", "ephemeral-storage": "100Gi", "pods": "110"},
            ),
            NodePool(
                name="gpu",
                initial_names=tuple(f"gpu-{i}" for i in range(2)),
                max_count=6,
                labels={"node.kubernetes.io/instance-type": "gpu-16", "nvidia.com/gpu.present": "true"},
                taints=({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},),
                allocatable={
                    "cpu": "16",
                    "memory": "64Gi",
                    "ephemeral-storage": "100Gi",
                    "nvidia.com/gpu": "4",
                    "pods": "110",
                },
            ),
        )
    )


def parse_config(data: Any) -> NodeConfig:
    """Validate a decoded YAML document and build the pools it describes."""
    if data is None:
        return default_config()
    try:
        jsonschema.validate(data, _SCHEMA)
    except jsonschema.ValidationError as exc:
        where = ".".join(str(p) for p in exc.absolute_path) or "config"
        raise NodeConfigError(f"{where}: {exc.message}") from None
    try:
        default_runtime = parse_duration(data.get("defaultRuntime", DEFAULT_RUNTIME_SECONDS))
    except DurationError as exc:
        raise NodeConfigError(f"defaultRuntime: {exc}") from None
    pools: list[NodePool] = []
    seen_pools: set[str] = set()
    seen_nodes: set[str] = set()
    for index, raw in enumerate(data.get("pools") or []):
        where = f"pools.{index}"
        name = raw["name"]
        if name in seen_pools:
            raise NodeConfigError(f"{where}.name: duplicate pool {name!r}")
        seen_pools.add(name)
        if "names" in raw and "count" in raw:
            raise NodeConfigError(f"{where}: give either names or count, not both")
        names = tuple(raw["names"]) if "names" in raw else tuple(
            f"{name}-{i}" for i in range(raw.get("count", 1))
        )
        for node_name in names:
            if node_name in seen_nodes:
                raise NodeConfigError(f"{where}.names: duplicate node {node_name!r}")
            seen_nodes.add(node_name)
        max_count = raw.get("maxCount", len(names))
        if max_count < len(names):
            raise NodeConfigError(f"{where}.maxCount: {max_count} is below the initial {len(names)} nodes")
        allocatable: dict[str, str] = {}
        for resource, amount in (raw.get("allocatable") or {}).items():
            try:
                parse_quantity(amount)
            except QuantityError as exc:
                raise NodeConfigError(f"{where}.allocatable.{resource}: {exc}") from None
            allocatable[resource] = str(amount)
        allocatable.setdefault("pods", "110")
        pools.append(
            NodePool(
                name=name,
                initial_names=names,
                max_count=max_count,
                labels=dict(raw.get("labels") or {}),
                taints=tuple(dict(t) for t in raw.get("taints") or []),
                allocatable=allocatable,
            )
        )
    if not pools:
        return NodeConfig(pools=default_config().pools, default_runtime=default_runtime)
    return NodeConfig(pools=tuple(pools), default_runtime=default_runtime)


def load_config(path: str | Path) -> NodeConfig:
    """Read a node configuration file; errors name the file and the field."""
    try:
        with Path(path).open() as stream:
            return parse_config(yaml.safe_load(stream))
    except OSError as exc:
        problem = exc.strerror or str(exc)
    except yaml.YAMLError as exc:
        problem = f"not valid YAML: {exc}".splitlines()[0]
    except NodeConfigError as exc:
        problem = str(exc)
    raise NodeConfigError(f"{path}: {problem}")
