"""``python -m nnjit.cli`` is the ``nnjit`` command."""

import sys

from nnjit.cli import main

sys.exit(main())
