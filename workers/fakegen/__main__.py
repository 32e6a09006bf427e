"""Allow ``python -m workers.fakegen``."""

import sys

from workers.fakegen.cli import main

sys.exit(main())
