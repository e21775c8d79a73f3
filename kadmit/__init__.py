"""kadmit: Kueue-compatible batch admission for Kubernetes.

Everything lives under this one namespace: ``kadmit.engine`` (the pure admission engine),
``kadmit.kube`` (the one Kubernetes I/O layer), ``kadmit.workload`` (the Workload vocabulary),
``kadmit.webhook``, ``kadmit.checks`` (the plugin SDK: ``from kadmit.checks import ...``),
``kadmit.certs``, ``kadmit.controller`` (the control loops and the ``kadmit`` command) and
``kadmit.localcluster`` (the embedded cluster, a separate world). Importing this package imports
none of them, so ``kadmit --version`` and a plugin's ``import kadmit.checks`` stay light.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kadmit")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
