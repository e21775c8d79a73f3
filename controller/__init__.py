"""kadmit control loops, the manager and the ``kadmit`` command line."""
