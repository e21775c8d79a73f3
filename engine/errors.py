"""Errors the engine raises for objects it cannot accept.

Every rejection names the field path (``spec.resourceGroups[0].flavors[1].name``) so that a
user, a webhook or a CLI can print one line that says exactly what to fix.
"""

from __future__ import annotations


class InvalidObject(ValueError):
    """A Kueue object (or a Kubernetes quantity inside one) that does not follow the API."""

    def __init__(self, kind: str, name: str, path: str, message: str) -> None:
        self.kind = kind
        self.name = name
        self.path = path
        self.message = message
        where = f"{kind} {name!r}" if name else kind
        super().__init__(f"{where}: {path}: {message}" if path else f"{where}: {message}")


class UnsupportedConfiguration(ValueError):
    """A configuration the engine understands but does not implement (yet)."""
