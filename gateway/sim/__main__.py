"""`python -m gateway.sim`: the same as `costgate sim`."""

import sys

from gateway.cli_sim import main

sys.exit(main())
