"""Which network a connection reaches: the one key of its quota, write lease and sync ledger.

Connections are written by different people: ``https://API.example.com:443/v1/`` and
``https://api.example.com/v1`` are one network, and so are two connections with different keys
(the service counts its budget per network and user type, whatever the key). The identity is

* the connection extra ``network`` when set: a name (``acme``; letters, digits, ``.``, ``_``,
  ``-``; case-insensitive), or a base URL (``https://api.acme.example/v1``) when this
  connection reaches that network by another host name (an IP address, an internal alias);
* otherwise the base URL, normalized so that every spelling of one address is one key: scheme
  lower-case; the host by its address, not its spelling (:func:`normalize_host`: an IP literal
  in its one ``ipaddress`` form, so ``[::1]``, ``[0:0:0:0:0:0:0:1]`` and ``[::0001]`` are one,
  and an IPv4-mapped IPv6 address is its IPv4 address; a host name case-folded, its trailing
  dot dropped, internationalized labels in their ASCII (punycode) form, so ``bücher.example``,
  ``BÜCHER.example.`` and ``xn--bcher-kva.example`` are one); the scheme's default port
  dropped whether or not it was written (``[::1]:443`` and ``[::1]`` over https are one); the
  trailing slash dropped, the path kept (case and all).

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
import ipaddress
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from affiliate_network.exceptions import ConnectionConfigError

__all__ = [
    "NETWORK_EXTRAS",
    "NetworkIdentity",
    "network_identity",
    "normalize_base_url",
    "normalize_host",
]

#: The connection extras that name the network (the second is its older name).
NETWORK_EXTRAS = ("network", "quota_network")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")
_SLUG_UNSAFE = re.compile(r"[^a-z0-9._-]+")
#: Label separators IDNA reads as ``.`` (ideographic and fullwidth full stops).
_DOTS = re.compile("[\u3002\uff0e\uff61]")
_ACE = "xn--"


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


def normalize_host(host: str) -> str:
    """One spelling per address: an IP literal in its ``ipaddress`` form (IPv6 compressed, in
    brackets; an IPv4-mapped IPv6 address as its IPv4 address), a host name case-folded, its
    trailing dot dropped and each internationalized label in its ASCII form (``xn--``).

    A host name's labels are read as IDNA 2008 / UTS 46 read them, in their commonest part:
    compatibility-normalized (NFKC: full-width letters, composed accents) and lower-cased
    (not case-folded: ``ß`` stays ``ß``, as IDNA 2008 keeps it), the ideographic full stops
    taken as dots. A host that does not read as a name (an empty label, a bad ``xn--`` label)
    is kept as written, lower-cased: never joined with another, never refused here.

    :param host: the host of a URL, without brackets (``urlsplit(url).hostname``).
    """
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return _normalize_name(host)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return f"[{address.compressed}]"
    return str(address)


def _normalize_name(host: str) -> str:
    """A host name's one form (see :func:`normalize_host`)."""
    text = _DOTS.sub(".", unicodedata.normalize("NFKC", host)).lower()
    text = text.removesuffix(".")
    labels = text.split(".")
    if not all(labels):
        return host.lower()
    try:
        return ".".join(_ascii_label(label) for label in labels)
    except (UnicodeError, ValueError):
        return host.lower()


def _ascii_label(label: str) -> str:
    """A label's ASCII form: an ``xn--`` label decoded and encoded again (its one spelling),
    a label with other than ASCII characters encoded."""
    if label.startswith(_ACE) and label.isascii():
        decoded = label[len(_ACE) :].encode("ascii").decode("punycode")
        label = unicodedata.normalize("NFKC", decoded).lower()
    if label.isascii():
        return label
    return _ACE + label.encode("punycode").decode("ascii")


def normalize_base_url(url: str) -> str:
    """``url`` with lower-case scheme, its host by its address (:func:`normalize_host`), no
    default port, no trailing slash.

    The path keeps its case (a server may tell ``/V1`` from ``/v1``); user info is dropped
    (the base URL never carries credentials: the hook refuses them).

    :param url: an ``http(s)`` URL.
    :raises ValueError: not an http(s) URL with a host, or a port that is not a number.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError("not an http(s) URL with a host")
    host = normalize_host(parts.hostname)  # hostname: brackets of an IPv6 address removed
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
