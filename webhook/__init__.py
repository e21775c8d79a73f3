"""The aiohttp HTTPS admission server (AdmissionReview in, JSONPatch out)."""

if __name__ != "kadmit.webhook":  # the folder is on sys.path too (a checkout): one name only
    raise ImportError(f"import kadmit.webhook, not {__name__}")
