"""``python -m kadmit``: the ``kadmit`` command."""

import sys

from kadmit.controller.cli import main

sys.exit(main())
