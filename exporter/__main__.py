"""``python -m exporter``: the command line (see ``exporter.cli``)."""

import sys

from .cli import main

# Guarded: worker processes of `check -j N` import this module again under another name.
if __name__ == "__main__":
    sys.exit(main())
