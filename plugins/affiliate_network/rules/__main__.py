"""``python -m affiliate_network.rules``: same as the ``affiliate-network-rules`` command."""

from __future__ import annotations

import sys

from affiliate_network.rules.cli import main

sys.exit(main())
