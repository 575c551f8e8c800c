"""`python -m gateway.cli`: the same as the `costgate` console script."""

import sys

from gateway.cli.main import main

sys.exit(main())
