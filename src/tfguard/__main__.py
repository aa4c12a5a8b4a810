"""`python -m tfguard`: the same as the `tfguard` command."""

import sys

from tfguard._cli import main

sys.exit(main())
