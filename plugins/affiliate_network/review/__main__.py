"""``python -m affiliate_network.review``: same as the ``affiliate-network-rules`` command."""

from __future__ import annotations

import sys

from affiliate_network.review.cli import main

sys.exit(main())
