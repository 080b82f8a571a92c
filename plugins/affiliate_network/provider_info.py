"""Provider metadata: the connection form is declared here, as Airflow 3.2+ expects.

Kept in its own module so ``get_provider_info()`` stays import-light (no hook, no requests).
"""

from __future__ import annotations

from typing import Any

#: The provider's version (``affiliate_network.__version__``; the manifests record it).
VERSION = "0.1.0"


CONN_TYPE = "affiliate_network"

PROVIDER_INFO: dict[str, Any] = {
    "package-name": "airflow-provider-affiliate-network",
    "name": "Affiliate Network",
    "description": "Hook, operators and a local sandbox for an affiliate tracking network API "
    "(network, affiliate, advertiser and marketplace portals).",
    "versions": [VERSION],
    # Listed by `airflow providers triggers`; the triggerer imports a trigger by its classpath.
    "triggers": [
        {
            "integration-name": "Affiliate Network",
            "python-modules": ["affiliate_network.triggers.lease"],
        }
    ],
    "connection-types": [
        {
            "connection-type": CONN_TYPE,
            "hook-class-name": "affiliate_network.hooks.affiliate_network.AffiliateNetworkHook",
            "hook-name": "Affiliate Network",
            "ui-field-behaviour": {
                "hidden-fields": ["schema", "port", "login"],
                "relabeling": {"host": "Base URL (ends in /v1)", "password": "API key"},
                "placeholders": {
                    "host": "https://api.example-network.com/v1",
                    "password": "the portal's API key",
                    "extra": '{"portal": "network"}',
                },
            },
            "conn-fields": {
                "portal": {
                    "label": "Portal",
                    "description": "Which portal the key belongs to: network, affiliate, "
                    "advertiser or marketplace. A key works only on its own portal.",
                    "schema": {
                        "type": "string",
                        "enum": ["network", "affiliate", "advertiser", "marketplace"],
                    },
                },
                "region": {
                    "label": "Region",
                    "description": "'eu' for accounts hosted on the EU servers; their requests "
                    "go to the EU base URL.",
                    # A real default: without one the dropdown showed the word "null" (issue 19).
                    # None stays valid (cleared field, older connections): the hook reads it as
                    # "default".
                    "schema": {
                        "type": ["string", "null"],
                        "enum": ["default", "eu", None],
                        "default": "default",
                        "values_display": {
                            "eu": "eu (uses the EU base URL)",
                            "null": "not set (same as default)",
                        },
                    },
                },
                "eu_base_url": {
                    "label": "EU base URL",
                    "description": "Base address of the EU servers (ends in /v1). Used when "
                    "region is 'eu'.",
                    "schema": {"type": ["string", "null"]},
                },
                "key_header": {
                    "label": "API key header",
                    "description": "The HTTP header the API key is sent in. Empty: "
                    "X-Svc-Api-Key (the API's). The real API family's clients send "
                    "X-Eflow-API-Key. Letters, digits and !#$%&'*+-.^_`|~ only.",
                    "schema": {
                        "type": ["string", "null"],
                        "maxLength": 64,
                        "pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]*$",
                    },
                },
                "timeout": {
                    "label": "Timeout (s)",
                    "description": "Per-request timeout in seconds.",
                    "schema": {"type": ["number", "null"], "minimum": 1},
                },
                "page_size": {
                    "label": "Page size",
                    "description": "Rows per page on paginated endpoints (maximum 2000).",
                    "schema": {"type": ["integer", "null"], "minimum": 1, "maximum": 2000},
                },
                "concurrency": {
                    "label": "Concurrent page requests",
                    "description": "How many pages a paged pull fetches at once.",
                    "schema": {"type": ["integer", "null"], "minimum": 1, "maximum": 10},
                },
            },
        }
    ],
}
