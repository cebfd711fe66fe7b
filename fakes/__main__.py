"""``python -m fakes``."""

import sys

from fakes.cli import main

sys.exit(main())
