"""kadmit control loops, the manager and the ``kadmit`` command line."""

if __name__ != "kadmit.controller":  # the folder is on sys.path too (a checkout): one name only
    raise ImportError(f"import kadmit.controller, not {__name__}")
