"""An embedded Kubernetes control plane for local runs and tests (kadmit talks to it only over HTTP)."""

if __name__ != "kadmit.localcluster":  # the folder is on sys.path too (a checkout): one name only
    raise ImportError(f"import kadmit.localcluster, not {__name__}")
