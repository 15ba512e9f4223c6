"""Header names the gateway and the engine server agree on (torch-free).

The trusted-namespace pair: the gateway sends the tenant's prefix namespace in
``x-cachegate-namespace`` together with the shared engine key in
``x-cachegate-engine-key``; the engine honours the namespace only when the key
matches (``prefix/serve/trusted_namespace.py``), else it runs the request in
``DEFAULT_NAMESPACE``. The gateway never gives a tenant that namespace.
"""

from __future__ import annotations

NAMESPACE_HEADER = "x-cachegate-namespace"
KEY_HEADER = "x-cachegate-engine-key"
DEFAULT_NAMESPACE = "default"
REQUEST_ID_HEADER = "x-request-id"
