"""API keys of the sandbox: one key type per portal, selected by the path prefix."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from affiliate_network_sandbox import choices
from affiliate_network_sandbox.errors import ApiError, before

#: Path prefix (first segment after /v1) -> portal.
PORTAL_PREFIXES = {
    "networks": "network",
    "affiliates": "affiliate",
    "advertisers": "advertiser",
    "partners": "marketplace",
}
HEADER = b"x-svc-api-key"  # ASGI lower-cases header names, so every spelling matches
#: The real API family's spelling (its reference and public clients send it; real-service
#: facts "header"): a documented alias. When both are sent, the spec's header is the one read.
HEADER_ALIAS = b"x-eflow-api-key"


@dataclass(frozen=True)
class Principal:
    """Who a key belongs to.

    :param region: ``default`` or ``eu``.
    :param portal: network, affiliate, advertiser or marketplace.
    :param entity_id: affiliate or advertiser id for those portals, else 0.
    :param scopes: permission scopes (network keys).
    """

    region: str
    portal: str
    entity_id: int = 0
    scopes: frozenset[str] = frozenset({"read", "write"})


def _key(key_seed: int, region: str, role: str, ident: int | str = "") -> str:
    digest = hashlib.sha256(f"{key_seed}:{region}:{role}:{ident}".encode()).hexdigest()
    return f"sbx_{role[:3]}_{digest[:28]}"


class KeyRing:
    """All keys of both regions; rebuilt on reset (same ids -> same keys).

    :param key_seed: the startup seed (keys do not change when a reset picks another data seed).
    """

    def __init__(self, key_seed: int) -> None:
        self.key_seed = key_seed
        self.principals: dict[str, Principal] = {}
        self.revoked: set[str] = set()
        self.listing: dict[str, Any] = {}

    def build(self, regions: dict[str, tuple[list[int], list[int]]]) -> None:
        """``regions``: region -> (affiliate ids, advertiser ids)."""
        self.principals.clear()
        self.revoked.clear()
        listing: dict[str, Any] = {}
        for region, (aff_ids, adv_ids) in regions.items():
            ks = self.key_seed
            net = _key(ks, region, "network")
            restricted = _key(ks, region, "network_restricted")
            market = _key(ks, region, "marketplace")
            revoked = _key(ks, region, "revoked")
            self.principals[net] = Principal(region, "network")
            self.principals[restricted] = Principal(region, "network", 0, frozenset({"read"}))
            self.principals[market] = Principal(region, "marketplace")
            self.revoked.add(revoked)
            affs = {}
            for fid in aff_ids:
                k = _key(ks, region, "affiliate", fid)
                self.principals[k] = Principal(region, "affiliate", fid)
                affs[str(fid)] = k
            advs = {}
            for aid in adv_ids:
                k = _key(ks, region, "advertiser", aid)
                self.principals[k] = Principal(region, "advertiser", aid)
                advs[str(aid)] = k
            entry = {
                "network": net,
                "marketplace": market,
                "affiliate": affs,
                "advertiser": advs,
                "network_restricted": restricted,
                "revoked": revoked,
            }
            if region == "default":
                listing.update(entry)
            else:
                listing[region] = entry
        self.listing = listing

    def authenticate(self, raw: str | None, region: str, portal: str | None) -> Principal:
        """The principal of ``raw`` for a request to ``portal`` in ``region``, or an ApiError.

        ``portal`` None: any portal's key is accepted (metadata lookups).
        """
        if raw is None:
            raise before(401, choices.MSG_NO_HEADER)
        principal = self.principals.get(raw)
        # A key of the other region is unknown here, like a revoked or mistyped one.
        if principal is None or raw in self.revoked or principal.region != region:
            raise before(401, choices.MSG_BAD_KEY)
        if portal is not None and principal.portal != portal:
            raise before(403, choices.MSG_OUT_OF_REALM)
        return principal


def require_scope(principal: Principal, scope: str) -> None:
    if scope not in principal.scopes:
        raise ApiError(403, choices.MSG_NO_SCOPE, "Error")
