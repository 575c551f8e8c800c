"""`python -m gateway.devtools.sim`: the same as `costgate sim`."""

import sys

from gateway.devtools.sim.main import main

sys.exit(main())
