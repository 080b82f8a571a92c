"""``python -m affiliate_network.backtest``: the ``affiliate-network-rules`` command."""

from __future__ import annotations

import sys

from affiliate_network.backtest.cli import main

sys.exit(main())
