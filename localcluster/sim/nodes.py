"""Registers Nodes, as kubelets joining a cluster do: create the Node, then report its status."""

from __future__ import annotations

from ..errors import ApiError
from ..interfaces import Endpoint
from ..objects import Obj
from .client import NODES, RestClient
from .nodeconfig import NodeConfig


async def register_node(client: RestClient, node: Obj) -> Obj:
    """Create ``node`` (or find it) and write its status, which a create does not store."""
    name = node["metadata"]["name"]
    try:
        stored = await client.create(NODES, None, node)
    except ApiError as exc:
        if exc.code != 409:
            raise
        stored = await client.get(NODES, None, name)
    if stored.get("status") != node.get("status"):
        stored = await client.replace(NODES, {**stored, "status": node.get("status") or {}}, "status")
    return stored


class NodeRegistrar:
    """Registers every pool's initial Nodes at start; Nodes already present keep their spec."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.registered: list[str] = []

    async def start(self, endpoint: Endpoint) -> None:
        client = RestClient(endpoint)
        try:
            for pool in self.config.pools:
                for name in pool.initial_names:
                    await register_node(client, pool.node(name))
                    self.registered.append(name)
        finally:
            await client.close()

    async def stop(self) -> None:
        """Nodes outlive the registrar, as they outlive a restarted kubelet."""
