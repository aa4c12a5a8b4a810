"""`python -m tfguard`: the same as the `tfguard` command."""

import sys

from tfguard.cli import main

sys.exit(main())
