"""``python -m exporter``: the command line (see ``exporter.cli``)."""

import sys

from .cli import main

sys.exit(main())
