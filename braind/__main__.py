"""`python -m braind` runs the CLI."""

import sys

from braind.cli import main

sys.exit(main())
