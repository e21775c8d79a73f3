"""kadmit control loops, the manager and the ``kadmit`` command line."""

from kadmit import under_one_name

under_one_name(__name__)
