"""``python -m demo``: see :mod:`demo.run`."""

from __future__ import annotations

import sys

from demo.run import main

sys.exit(main())
