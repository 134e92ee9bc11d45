"""`python -m exporter` is `ridgeline`."""

import sys

from exporter.cli import main

sys.exit(main())
