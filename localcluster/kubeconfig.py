"""Kubeconfig files for a running API server, in the shape kubectl and kubernetes-asyncio read.

Kept separate so that other code (a multi-cluster helper that stores worker kubeconfigs in
Secrets) can build the same document for any endpoint.
"""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path

import yaml

from kadmit.localcluster.objects import Obj


def kubeconfig_dict(
    server: str,
    *,
    token: str | None = None,
    ca_file: str | None = None,
    ca_data: bytes | None = None,
    name: str = "kadmit-local",
    namespace: str | None = None,
) -> Obj:
    """A one-cluster, one-user, one-context kubeconfig. ``ca_data`` (PEM) is inlined when given."""
    cluster: Obj = {"server": server}
    if ca_data is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_data).decode()
    elif ca_file is not None:
        cluster["certificate-authority"] = str(ca_file)
    user: Obj = {"token": token} if token else {}
    context: Obj = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": context}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str | os.PathLike[str], config: Obj) -> Path:
    """Write atomically (temporary file + rename), readable only by the owner: it may hold a token."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kubeconfig-", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            yaml.safe_dump(config, handle, sort_keys=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
