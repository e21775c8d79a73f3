"""Self-managed webhook certificates: CA, serving certificate, rotation, caBundle injection."""

if __name__ != "kadmit.certs":  # the folder is on sys.path too (a checkout): one name only
    raise ImportError(f"import kadmit.certs, not {__name__}")
