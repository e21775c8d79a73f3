"""kadmit: Kueue-compatible batch admission for Kubernetes.

Everything lives under this one namespace: ``kadmit.engine`` (the pure admission engine),
``kadmit.kube`` (the one Kubernetes I/O layer), ``kadmit.workload`` (the Workload vocabulary),
``kadmit.webhook``, ``kadmit.checks`` (the plugin SDK: ``from kadmit.checks import ...``),
``kadmit.certs``, ``kadmit.controller`` (the control loops and the ``kadmit`` command) and
``kadmit.localcluster`` (the embedded cluster, a separate world). Importing this package imports
none of them, so ``kadmit --version`` and a plugin's ``import kadmit.checks`` stay light.
"""

from importlib.metadata import PackageNotFoundError, version


def under_one_name(module_name: str) -> None:
    """Refuse a subpackage imported by its folder's own name (``import engine``).

    In a checkout the repository root is on ``sys.path`` as well, so each folder could load a
    second time under its bare name, as another module with its own globals (two registries, two
    metrics families). Every subpackage of kadmit's calls this first; ``kadmit.localcluster`` keeps
    its own copy, as it imports nothing of kadmit's.
    """
    if not module_name.startswith("kadmit."):
        raise ImportError(f"import kadmit.{module_name}, not {module_name}")


try:
    __version__ = version("kadmit")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
