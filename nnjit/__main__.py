"""``python -m nnjit`` is the ``nnjit`` command."""

import sys

from nnjit.cli import main

sys.exit(main())
