"""The ``service_tier`` a semantic hit reports (``gateway/proxy/routes.py``).

OpenAI documents a response's ``service_tier`` as the processing mode actually used to
serve the request, which "may be different from the value set in the parameter". A hit
is processed by no tier: the stored value is the tier of whichever request filled the
cache (a review, session 47), perhaps another client's "priority" or "flex", and
replaying it, or echoing the tier this client asked for, would tell the client
something false about how its request was served, and billed. So a stored field
becomes null: the hit keeps the shape of the upstream answer it replays (every key, in
its order, on every streamed chunk), and null is what vLLM itself answers when no tier
applies. An answer stored without the field gets none.
"""

from __future__ import annotations

from typing import Any

_FIELD = "service_tier"


def without_tier(stored: dict[str, Any]) -> dict[str, Any]:
    """``stored`` (a stored answer, never changed) as a hit replays it: its
    ``service_tier`` null, left out when the stored answer has none."""
    if _FIELD not in stored:
        return stored
    return stored | {_FIELD: None}
