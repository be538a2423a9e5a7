"""`python -m braind` runs the CLI."""

import sys

from braind.faces.cli import main

if __name__ == "__main__":  # not when a worker process re-imports the main module
    sys.exit(main())
