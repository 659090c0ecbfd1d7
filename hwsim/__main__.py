"""``python -m hwsim``: the same as the ``hwsim`` command."""

import sys

from hwsim.cli import main

sys.exit(main())
