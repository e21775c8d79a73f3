"""What pyproject.toml cannot say: with ``KADMIT_COMPILE=1`` the admission engine is compiled.

``kadmit.engine`` is pure, fully typed Python; mypyc (part of mypy) compiles it to a C extension
that makes the same decisions 1.15 to 1.3 times faster (bench/README.md, "the engine compiled").
The wheel and the image are built that way (``KADMIT_COMPILE=1 pip wheel .``); an ordinary or
editable install (``pip install -e .``) stays interpreted, so that an edit to ``engine/*.py``
takes effect at once (a compiled module beside its source would be imported instead of it).
``hack/build_backend.py`` adds mypy to the build requirements when compiling.
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import Extension, setup


def engine_extensions() -> list[Extension]:
    flag = os.environ.get("KADMIT_COMPILE", "0")
    if flag not in ("0", "1"):
        raise SystemExit(f"KADMIT_COMPILE={flag!r}: use 1 to compile the engine, 0 (the default) not to")
    if flag == "0":
        return []
    from mypyc.build import mypycify

    sources = sorted(str(path) for path in Path("kadmit/engine").glob("*.py"))
    # One group: the modules call each other natively, in one shared library inside the package.
    return mypycify(sources, opt_level="3", debug_level="0", group_name="kadmit.engine")


setup(ext_modules=engine_extensions())
