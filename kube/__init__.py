"""kadmit's one Kubernetes I/O layer: the client, its errors, resource naming, the informer,
the work queue and workers, the write pipeline, leader election. It imports nothing else of kadmit's.
"""

if __name__ != "kadmit.kube":  # the folder is on sys.path too (a checkout): one name only
    raise ImportError(f"import kadmit.kube, not {__name__}")
