"""Defaults the command line shows in its help, importable without the controller's dependencies.

``kadmit --help`` builds every command's parser, so a default it prints must not come from a
module that imports aiohttp or kubernetes-asyncio (:mod:`kadmit.controller.config` does).
"""

DEFAULT_NAMESPACE = "kadmit-system"
"""Where kadmit's own objects live (Kueue's ``namespace`` setting; ``kueue-system`` in Kueue)."""
