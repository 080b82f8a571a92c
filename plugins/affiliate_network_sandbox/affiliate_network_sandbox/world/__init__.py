"""A world = one network (default region or EU), split by resource area.

:class:`World` puts the areas together; each area module holds the endpoint logic of one part of
the API (reporting, offers and groups, custom settings, catalog entities, admin views) over the
shared state of :class:`~affiliate_network_sandbox.world.base.WorldBase`.
"""

from __future__ import annotations

from affiliate_network_sandbox.world.admin import AdminArea
from affiliate_network_sandbox.world.base import EU_SEED_OFFSET, SCRUB_RATE_BASE, Raw, WorldBase
from affiliate_network_sandbox.world.catalog import CatalogArea
from affiliate_network_sandbox.world.custom_settings import CustomSettingsArea
from affiliate_network_sandbox.world.offers import OffersArea
from affiliate_network_sandbox.world.reporting import ReportingArea

__all__ = ["EU_SEED_OFFSET", "SCRUB_RATE_BASE", "Raw", "World", "WorldBase"]


class World(ReportingArea, OffersArea, CustomSettingsArea, CatalogArea, AdminArea):
    """One network's data and the logic of every endpoint that works on it.

    :param cfg: data configuration.
    :param region: ``default`` or ``eu``.
    """
