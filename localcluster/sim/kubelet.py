"""The kubelets of every simulated Node: bound Pods start, run for a while, and end.

A Pod runs for the duration in its ``localcluster.kadmit.dev/runtime`` annotation (``5s``,
``500ms``, ``0``), or the cluster's default, then Succeeds, or Fails when its
``localcluster.kadmit.dev/exit-code`` annotation is not ``0``. A Pod with ``restartPolicy:
Always`` (the default for bare Pods) has its containers restarted, so it stays Running until
deleted. Time is the event loop's clock.
"""

from __future__ import annotations

import asyncio
import copy

from .. import timestamps
from ..conditions import set_condition
from ..objects import Obj
from .client import PODS, delete_options, ignore_stale, key_of
from .controller import Controller
from .duration import DurationError, parse_duration

RUNTIME_ANNOTATION = "localcluster.kadmit.dev/runtime"
EXIT_CODE_ANNOTATION = "localcluster.kadmit.dev/exit-code"
Key = tuple[str, str]


def _annotations(pod: Obj) -> dict[str, str]:
    return dict((pod.get("metadata") or {}).get("annotations") or {})


def runtime_of(pod: Obj, default: float) -> float:
    raw = _annotations(pod).get(RUNTIME_ANNOTATION)
    return default if raw is None else parse_duration(raw)


def exit_code_of(pod: Obj) -> int:
    raw = _annotations(pod).get(EXIT_CODE_ANNOTATION, "0")
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"invalid {EXIT_CODE_ANNOTATION} {raw!r}: want an integer") from exc


def running_status(pod: Obj) -> Obj:
    """Status of a Pod whose containers all started and are ready."""
    now = timestamps.now()
    status = copy.deepcopy(pod.get("status") or {})
    status["phase"] = "Running"
    status["startTime"] = status.get("startTime") or now
    status["hostIP"] = status["podIP"] = "10.0.0.1"
    for kind in ("PodScheduled", "Initialized", "PodReadyToStartContainers", "ContainersReady", "Ready"):
        set_condition(status, kind, "True", "", "", now, probed=True)
    status["containerStatuses"] = [
        {
            "name": container.get("name", ""),
            "image": container.get("image", ""),
            "imageID": "",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": now}},
        }
        for container in (pod.get("spec") or {}).get("containers") or []
    ]
    return status


def terminated_status(pod: Obj, exit_code: int, message: str = "") -> Obj:
    """Status of a Pod whose containers have all exited with ``exit_code``."""
    now = timestamps.now()
    status = copy.deepcopy(pod.get("status") or {})
    status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
    if message:
        status["message"] = message
    for kind in ("ContainersReady", "Ready"):
        set_condition(status, kind, "False", "PodCompleted", "", now, probed=True)
    reason = "Completed" if exit_code == 0 else "Error"
    started = status.get("startTime") or now
    status["containerStatuses"] = [
        {
            **{k: v for k, v in cs.items() if k != "state"},
            "ready": False,
            "started": False,
            "state": {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": reason,
                    "startedAt": started,
                    "finishedAt": now,
                }
            },
        }
        for cs in status.get("containerStatuses") or []
    ]
    return status


class Kubelet(Controller[Key]):
    """Runs every bound Pod of the cluster, whatever its Node."""

    name = "kubelet"
    workers = 8

    def __init__(self, default_runtime: float = 1.0) -> None:
        super().__init__()
        self.default_runtime = default_runtime
        self._ends: dict[str, float] = {}  # pod uid -> loop time its containers exit

    async def setup(self) -> None:
        self.pods = self.watch(PODS, self._on_pod)

    def _on_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        if kind == "DELETED":
            self._ends.pop(str((pod.get("metadata") or {}).get("uid", "")), None)
            return
        if (pod.get("spec") or {}).get("nodeName"):
            self.queue.add(key_of(pod))

    async def reconcile(self, key: Key) -> None:
        pod = self.pods.get(*key)
        if pod is None:
            return
        metadata = pod.get("metadata") or {}
        uid = str(metadata.get("uid", ""))
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if metadata.get("deletionTimestamp"):
            # The containers are stopped. A Pod a finalizer holds back records that it ended
            # Failed, as a kubelet does, so that whoever holds it sees how it ended; then the
            # graceful deletion is confirmed.
            self._ends.pop(uid, None)
            if phase not in ("Succeeded", "Failed") and metadata.get("finalizers"):
                await self._write(pod, terminated_status(pod, 137, "The pod was deleted"))
            await ignore_stale(self.api.delete(PODS, *key, delete_options(uid=uid, grace_seconds=0)))
            return
        if phase in ("Succeeded", "Failed"):
            self._ends.pop(uid, None)
            return
        loop = asyncio.get_running_loop()
        if phase == "Pending":
            try:
                runtime = runtime_of(pod, self.default_runtime)
                exit_code_of(pod)
            except (DurationError, ValueError) as exc:
                await self._write(pod, terminated_status(pod, 1, f"localcluster: {exc}"))
                return
            if await self._write(pod, running_status(pod)):
                self._ends[uid] = loop.time() + runtime
            return
        if (pod.get("spec") or {}).get("restartPolicy", "Always") == "Always":
            return  # its containers would be restarted forever: it stays Running until deleted
        end = self._ends.setdefault(uid, loop.time() + runtime_of(pod, self.default_runtime))
        remaining = end - loop.time()
        if remaining > 0:
            self.queue.add_after(key, remaining)
            return
        if await self._write(pod, terminated_status(pod, exit_code_of(pod))):
            self._ends.pop(uid, None)

    async def _write(self, pod: Obj, status: Obj) -> bool:
        """Replace the Pod's status; False when it changed meanwhile (its next event retries)."""
        return await ignore_stale(self.api.replace(PODS, {**pod, "status": status}, "status"))
