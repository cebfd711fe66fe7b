"""``python -m conformance.probe``: the same as ``conformance probe``."""

import sys

from conformance.probe.cli import main

sys.exit(main())
