"""Former home of the offer-state sync operators, kept so existing imports keep working.

The module holds the whole offer-state sync (six sections), not only scrub rates, so it now
lives in :mod:`affiliate_network.operators.offer_state_sync`.
"""

from affiliate_network.operators.offer_state_sync import (
    OfferCatalogSyncOperator,
    OfferGroupCapsSyncOperator,
    OfferPayoutSyncOperator,
    OfferStateSyncOperator,
    ScrubRateSyncOperator,
    resolve_state_file,
)

__all__ = [
    "OfferCatalogSyncOperator",
    "OfferGroupCapsSyncOperator",
    "OfferPayoutSyncOperator",
    "OfferStateSyncOperator",
    "ScrubRateSyncOperator",
    "resolve_state_file",
]
