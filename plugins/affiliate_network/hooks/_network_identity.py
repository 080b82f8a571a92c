"""Which network a connection reaches: the one key of its quota, write lease and sync ledger.

Connections are written by different people: ``https://API.example.com:443/v1/`` and
``https://api.example.com/v1`` are one network, and so are two connections with different keys
(the service counts its budget per network and user type, whatever the key). The identity is

* the connection extra ``network`` when set: a name (``acme``; letters, digits, ``.``, ``_``,
  ``-``; case-insensitive), or a base URL (``https://api.acme.example/v1``) when this
  connection reaches that network by another host name (an IP address, an internal alias);
* otherwise the base URL, normalized: scheme and host lower-case, the scheme's default port
  dropped, the trailing slash dropped, the path kept (case and all).

Two different host names cannot be proven to be one network from here (``127.0.0.1`` and
``localhost`` may be one machine, or not), so they are joined only when a person says so: both
connections name the network (``network: sandbox``), or one names the other's URL.

The older extra ``quota_network`` is the same setting under its first name (it separated two
networks behind one URL): it is read as ``network``; both set to different values is refused.

The key is never built from the API key, and :attr:`NetworkIdentity.slug` (file names) holds
no more than the identity itself: a host and port, or the name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from affiliate_network.exceptions import ConnectionConfigError

__all__ = ["NETWORK_EXTRAS", "NetworkIdentity", "network_identity", "normalize_base_url"]

#: The connection extras that name the network (the second is its older name).
NETWORK_EXTRAS = ("network", "quota_network")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")
_SLUG_UNSAFE = re.compile(r"[^a-z0-9._-]+")


@dataclass(frozen=True)
class NetworkIdentity:
    """One network, however its connections spell it.

    :param canonical: ``url:<normalized base URL>`` or ``name:<name>``; equal for every
        connection that reaches this network.
    :param explicit: whether a person named it (the ``network`` extra).
    """

    canonical: str
    explicit: bool = field(default=False, compare=False)

    @property
    def slug(self) -> str:
        """A file-name-safe key: readable part and a hash of :attr:`canonical`."""
        kind, _, value = self.canonical.partition(":")
        if kind == "url":
            parts = urlsplit(value)
            readable = f"{parts.hostname or ''}_{parts.port or ''}".rstrip("_")
        else:
            readable = value
        readable = _SLUG_UNSAFE.sub("_", readable.lower()).strip("_")[:60] or "network"
        digest = hashlib.sha256(self.canonical.encode()).hexdigest()[:12]
        return f"{readable}-{digest}"

    def __str__(self) -> str:
        return self.canonical.partition(":")[2]


def normalize_base_url(url: str) -> str:
    """``url`` with lower-case scheme and host, no default port, no trailing slash.

    The path keeps its case (a server may tell ``/V1`` from ``/v1``); user info is dropped
    (the base URL never carries credentials: the hook refuses them).

    :param url: an ``http(s)`` URL.
    :raises ValueError: not an http(s) URL with a host, or a port that is not a number.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError("not an http(s) URL with a host")
    host = parts.hostname  # lower-case already, brackets of an IPv6 address removed
    if ":" in host:
        host = f"[{host}]"
    port = parts.port  # ValueError for a port that is not a number
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def network_identity(base_url: str, extras: Mapping[str, Any], conn_id: str) -> NetworkIdentity:
    """The identity of the network a connection reaches (see the module doc).

    :param base_url: the connection's base URL (as the hook resolved it).
    :param extras: the connection's extras (``network``, or its older name ``quota_network``).
    :param conn_id: the connection id, for messages.
    :raises ConnectionConfigError: an invalid ``network`` value, or ``network`` and
        ``quota_network`` naming different networks.
    """
    named = {
        _named(value, conn_id)
        for value in (str(extras.get(name) or "").strip() for name in NETWORK_EXTRAS)
        if value
    }
    if len(named) > 1:
        raise ConnectionConfigError(
            f"connection {conn_id!r}: extras 'network' and 'quota_network' name different "
            "networks; 'quota_network' is the older name of 'network': keep 'network' only"
        )
    if not named:
        return NetworkIdentity(f"url:{normalize_base_url(base_url)}")
    return named.pop()


def _named(value: str, conn_id: str) -> NetworkIdentity:
    """The identity the ``network`` extra gives: a base URL or a name."""
    if "://" in value:
        try:
            return NetworkIdentity(f"url:{normalize_base_url(value)}", explicit=True)
        except ValueError:
            raise ConnectionConfigError(
                f"connection {conn_id!r}: extra 'network' looks like a URL but is not an "
                "http(s) URL with a host (give the network's base URL, or a name)"
            ) from None
    name = value.lower()
    if not _NAME.fullmatch(name):
        raise ConnectionConfigError(
            f"connection {conn_id!r}: extra 'network' must be a name of letters, digits, '.', "
            "'_' and '-' (at most 100, starting with a letter or digit) or a base URL"
        )
    return NetworkIdentity(f"name:{name}", explicit=True)
