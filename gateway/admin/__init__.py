"""The admin API under ``/admin`` (admin token): tenants, keys, versioned policies, cache
operations, explain, audit. ``service.py`` and ``policies.py`` are the one writer of
tenants, keys and policies; ``routes.py`` only maps HTTP onto them."""
