"""The API's objects as kadmit handles them: its JSON, as plain dicts (see :mod:`kadmit.kube.client`)."""

from typing import Any

Obj = dict[str, Any]
