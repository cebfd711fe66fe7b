"""Entry point for ``python -m reports``."""

import sys

from reports.cli import main

sys.exit(main())
