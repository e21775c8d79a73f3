"""``python -m kadmit.localcluster``: see :mod:`kadmit.localcluster.cli`."""

import sys

from kadmit.localcluster.cli import main

sys.exit(main())
