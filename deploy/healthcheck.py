"""Container health check: healthy when the gateway or the engine answers ``/health``.

One image runs either role, so the check tries the gateway port and then the
engine port (``CACHEGATE_PORT`` / ``CACHEGATE_ENGINE_PORT``); only one of them
is listening in any container. Standard library only: the slim image has no curl.
"""

from __future__ import annotations

import os
import sys
import urllib.request


def healthy(port: str, timeout: float = 4.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def main() -> int:
    ports = (
        os.environ.get("CACHEGATE_PORT", "8000"),
        os.environ.get("CACHEGATE_ENGINE_PORT", "8001"),
    )
    return 0 if any(healthy(p) for p in ports) else 1


if __name__ == "__main__":
    sys.exit(main())
