"""Replica sync: every gateway replica replays the shared change log.

Replicas share one database but keep in-memory state (FAISS indexes, the tenant
authentication cache); the change log carries what changed to each of them.

==========================  ========================================================
concept                     file
==========================  ========================================================
the feed (poll, wake-ups,   :mod:`gateway.sync.feed` (:class:`ChangeFeed`)
catch-up, prune)
position and gaps           :mod:`gateway.sync.position`
LISTEN connection           :mod:`gateway.sync.listener`
reading the log; the        :mod:`gateway.sync.log`
gateway's ``tenant`` rows
writing entry rows          :mod:`semantic.changes` (in the entry's transaction)
replaying entry rows        :mod:`semantic.replay` (called by the feed)
==========================  ========================================================
"""
