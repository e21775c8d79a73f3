"""kadmit's build backend: setuptools', plus mypy among the build requirements when
``KADMIT_COMPILE=1`` asks setup.py to compile the engine with mypyc (the requirements of
pyproject.toml are the same for every build, so this is where the condition goes)."""

from __future__ import annotations

import os
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (the backend's other hooks, unchanged)

COMPILER = "mypy>=2.4,<3"
"""mypyc ships inside mypy; the engine was compiled and tested with 2.4."""


def _compiler() -> list[str]:
    return [COMPILER] if os.environ.get("KADMIT_COMPILE") == "1" else []


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    compiler = _compiler()
    # setuptools runs setup.py to list its own requirements, before mypy is there to import.
    os.environ["KADMIT_COMPILE"] = "0"
    try:
        required = _setuptools.get_requires_for_build_wheel(config_settings)
    finally:
        os.environ["KADMIT_COMPILE"] = "1" if compiler else "0"
    return [*required, *compiler]


def _refuse_editable() -> None:
    if _compiler():
        raise SystemExit(
            "KADMIT_COMPILE=1 builds wheels (pip wheel ., pip install .), not editable installs: "
            "a compiled engine module beside engine/*.py would be imported instead of the source"
        )


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    _refuse_editable()
    return list(_setuptools.get_requires_for_build_editable(config_settings))


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    _refuse_editable()
    return str(_setuptools.build_editable(wheel_directory, config_settings, metadata_directory))
