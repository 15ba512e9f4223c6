"""Each tenant's verifier cut, computed from the database and kept (issue 12, part 3).

The cut itself comes from :func:`gateway.calibration.tenant_cut` over the tenant's
labelled samples (:func:`gateway.calibration_labels.load_labels`).

:class:`Calibrator` keeps each tenant's cut for ``ttl`` seconds (a label takes
effect within that time on every replica, since each reads the database); a
tenant change (deleted, policy or keys; the replica-sync feed) drops it at once, so
a tenant re-created under a deleted one's id never inherits its cut. When the
shipped curve is unusable the cut is 1.0 and the tenant's labels do not lower it.

While the database is away, a tenant keeps the last cut this replica computed for
it. One it has none for (a replica started during the outage, a policy changed just
before it, a new target) gets cut 1.0, ``source="unavailable"``: nothing is served
through the verifier until the labels can be read. The shipped cut would be a guess
there, and a looser one than the tenant's own wherever its reviewers had raised it.
After a failed read the database is left alone for ``retry`` seconds (doubled with
each failed probe in a row, up to 30 s; ended early when the background watch of
gateway/recovery.py finds the database answering), for every tenant, then one lookup
probes it, one probe at a time however long it hangs (each
try can wait out a connection timeout on a worker thread, and lookups of many tenants
must not queue behind such tries); only the probe's success ends the outage. A read
failing for another reason than the database not answering (:data:`OUTAGE_ERRORS`)
gives that tenant the same answer without marking the database away. A read's cut is
stamped when the read began, and never replaces one a later read computed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import replace

from sqlalchemy import Engine

from gateway.calibration import TARGET_GRID, CutInForce, tenant_cut
from gateway.calibration_labels import Retrieval, load_labels, lowest_misfire_similarity
from gateway.calibration_ruled_out import (
    LabelsMark,
    applies,
    evidence_key,
    labels_mark,
    load_ruled_out,
    save_ruled_out,
)
from gateway.db_rest import backoff
from semantic.store_db import OUTAGE_ERRORS as DB_OUTAGE_ERRORS

log = logging.getLogger("cachegate.gateway.calibration")

#: Errors that say the database did not answer (not that a query or a row was wrong:
#: those are one tenant's failure, and do not stop the others' reads).
OUTAGE_ERRORS = DB_OUTAGE_ERRORS  # (TimeoutError: the pool's, every connection stuck)


class Calibrator:
    """Each tenant's :class:`CutInForce`, computed from the database and kept ``ttl`` s.

    ``shipped`` maps a target to the shipped curve's cut; when it fails (a damaged
    calibration file), the cut is 1.0: nothing is served, never a guess.
    ``verifier_models``: the score scales in force (``GatewayVerifier.scale_ids``,
    one per language); only their samples are read (None: every scored sample).
    ``retry``: seconds between probes of the database while it is away."""

    def __init__(
        self,
        db: Engine | None,
        shipped: Callable[[float], float],
        ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        verifier_models: Collection[str] | None = None,
        retry: float = 5.0,
    ) -> None:
        self.db = db
        self.verifier_models = None if verifier_models is None else tuple(verifier_models)
        self.shipped = shipped
        self.ttl = ttl
        self.retry = retry
        self._clock = clock
        self._lock = threading.Lock()
        # (tenant, target) -> (stamp, cut, whether a read computed it at that stamp)
        self._cuts: dict[tuple[str, float], tuple[float, CutInForce, bool]] = {}
        # (tenant, target) -> the highest band cut its labels set: labels that arrive
        # below a range they ruled out (a review backlog) shift the bands, and the range
        # was served again (a review, session 40). Also kept in the database
        # (gateway/calibration_ruled_out.py), read with the labels, for other replicas
        # and restarts; this copy holds it should that write fail.
        # Keyed (tenant, target, retrieval key) as in the database.
        self._band_cuts: dict[tuple[str, float, str], float] = {}
        self._unsaved: dict[tuple[str, float, str], float] = {}  # floors a save failed for
        # While the database is away: no read before _next_try, and then one probe at a
        # time (a probe can hang far longer than ``retry`` on a dropped connection).
        self._away = False
        self._probing = False
        self._next_try = 0.0
        self._failures = 0  # probes in a row that failed: the wait doubles with them
        # Bumped by invalidate(): a read begun before a tenant changed does not keep its
        # cut after (a tenant re-created under a deleted one's id would inherit it).
        self._generation: dict[str, int] = {}
        self._generation_all = 0

    @property
    def is_database_away(self) -> bool:
        """Whether the labels were last found unreadable for a database error (until a
        probe reads them): cuts are then the last known ones, or 1.0."""
        return self._away

    def current(self, tenant_id: str, target: float) -> CutInForce | None:
        """The kept cut when it is still fresh, else None (then call :meth:`refresh`)."""
        with self._lock:
            kept = self._cuts.get((tenant_id, target))
        if kept is None or self._clock() - kept[0] > self.ttl:
            return None
        return kept[1]

    def refresh(
        self, tenant_id: str, target: float, retrieval: Retrieval | None = None
    ) -> CutInForce:
        """Compute the tenant's cut now (reads the database: call it off the event loop);
        ``retrieval``: the embedder and threshold its lookups use, below which its labels
        do not count (gateway/calibration_labels.py)."""
        usable = True
        try:
            shipped = float(self.shipped(target))
        except Exception as exc:
            log.error("verifier calibration unusable (%s): nothing is served", type(exc).__name__)
            shipped, usable = 1.0, False
        probe = self._claim_read()
        if probe is None:
            return self._without_labels(tenant_id, target, shipped)
        with self._lock:
            seen, started = self._generation_of(tenant_id), self._clock()
            # With a database, the floor is what it holds (a relabel on any replica
            # deletes it there; a copy kept here wrote it back) and what this process
            # could not save yet; without one, this process's own.
            floors = self._unsaved if self.db else self._band_cuts
            # a looser target's too: what it ruled out, a stricter one rules out
            ruled_out = max(
                (
                    cut
                    for (t, at, under), cut in floors.items()
                    if t == tenant_id and at >= target and applies(under, retrieval)
                ),
                default=0.0,
            )
        try:
            db, models = self.db, self.verifier_models
            mark = None if db is None else labels_mark(db, tenant_id)  # before they are read
            labels = [] if db is None else load_labels(db, tenant_id, models, retrieval)
            stored = 0.0 if db is None else load_ruled_out(db, tenant_id, target, models, retrieval)
            # what a floor from these labels rests on (calibration_ruled_out.py)
            lowest = (
                None if db is None else lowest_misfire_similarity(db, tenant_id, models, retrieval)
            )
        except OUTAGE_ERRORS as exc:
            self._database_away(exc)
            return self._without_labels(tenant_id, target, shipped)
        except Exception as exc:  # this tenant's read, not the database: said, not retried
            log.error("tenant calibration read failed (%s)", type(exc).__name__)
            return self._without_labels(tenant_id, target, shipped)
        finally:
            if probe:
                self._end_probe()
        if probe:
            with self._lock:
                self._away, self._failures = False, 0
            log.warning("tenant calibration readable again: cuts from the database")
        looser = self._looser(target)
        evidence = evidence_key(retrieval, lowest)
        floor_key = (tenant_id, target, evidence)
        ruled_out = max(ruled_out, stored)
        cut = tenant_cut(labels, target, shipped, refine=usable, looser=looser, kept=ruled_out)
        with self._lock:
            kept = self._cuts.get((tenant_id, target))
            # Not over a cut of a later read (reads can finish out of order), nor past a
            # tenant change; stamped when its read began, so its labels are never older
            # than ``ttl`` when used.
            newer = kept is not None and kept[2] and kept[0] > started
            unchanged = self._generation_of(tenant_id) == seen
            if unchanged and not newer:
                self._cuts[(tenant_id, target)] = (started, cut, True)
                if cut.band_cut > shipped:  # a range its labels ruled out
                    self._band_cuts[floor_key] = max(ruled_out, cut.band_cut)
        # not for a tenant changed meanwhile (deleted: its floors were deleted with it)
        if unchanged and self.db is not None and cut.band_cut > max(shipped, stored):
            saved = self._save_ruled_out(tenant_id, target, cut.band_cut, mark, evidence)
            with self._lock:
                if saved is None:  # not written: kept here, and tried again next time
                    self._unsaved[floor_key] = cut.band_cut
                else:  # written, or read from labels that are no longer the tenant's
                    self._unsaved.pop(floor_key, None)
                if saved is False:
                    self._band_cuts.pop(floor_key, None)
                    self._cuts.pop((tenant_id, target), None)  # read afresh next time
        return cut

    def _save_ruled_out(
        self,
        tenant_id: str,
        target: float,
        band_cut: float,
        mark: LabelsMark,
        evidence: str,
    ) -> bool | None:
        """Keep the floor in the database: True; False when its labels changed since
        they were read (calibration_ruled_out.py); None on a failure, logged (this
        process keeps it in memory, and the next refresh tries again)."""
        assert self.db is not None
        try:
            models = self.verifier_models
            return save_ruled_out(self.db, tenant_id, target, models, band_cut, mark, evidence)
        except Exception as exc:
            log.warning("verifier ruled-out cut not saved (%s): kept in memory", type(exc).__name__)
            return None

    def _looser(self, target: float) -> list[tuple[float, float]]:
        """(target, shipped cut) of each target of the curve's grid looser than this one."""
        out = []
        for wider in (t for t in TARGET_GRID if t > target):
            try:
                out.append((wider, float(self.shipped(wider))))
            except Exception:  # a damaged curve: refresh() already said so
                continue
        return out

    def _generation_of(self, tenant_id: str) -> tuple[int, int]:
        """(every tenant's, this tenant's) invalidations so far; call with the lock held."""
        return self._generation_all, self._generation.get(tenant_id, 0)

    def _claim_read(self) -> bool | None:
        """False: read as usual (the database answers); True: read as the one probe of a
        database found away; None: do not read (not yet time, or a probe is out)."""
        with self._lock:
            if not self._away:
                return False
            if self._probing or self._clock() < self._next_try:
                return None
            self._probing = True
            return True

    def _end_probe(self) -> None:
        with self._lock:
            self._probing = False
            self._next_try = self._clock() + backoff(self.retry, self._failures)

    def waits_for_database(self) -> bool:
        """Away, and not yet told that the database answers (:meth:`retry_now`): what
        the recovery watch pings for (once told, the next lookup's probe decides)."""
        with self._lock:
            return self._away and not self._probing and self._next_try > 0.0

    def retry_now(self) -> None:
        """The database answers again (gateway/recovery.py): the next lookup probes it
        at once instead of waiting out the rest (its read alone ends the outage)."""
        with self._lock:
            if self._away and not self._probing:
                self._next_try = 0.0
                # cuts kept without a read are no longer fresh, so the next lookup reads;
                # kept all the same, for the answer should that read fail too
                for key, (_, cut, read) in list(self._cuts.items()):
                    if not read:
                        self._cuts[key] = (float("-inf"), cut, False)

    def _database_away(self, exc: Exception) -> None:
        with self._lock:
            first, self._away = not self._away, True
            self._failures += 1
            self._next_try = self._clock() + backoff(self.retry, self._failures)
        if first:
            log.warning(
                "tenant calibration unavailable (%s): last known cuts kept, cut 1.0 where"
                " none is known, one probe of the database every %g s",
                type(exc).__name__,
                self.retry,
            )

    def hung(self, tenant_id: str, target: float, exc: Exception) -> CutInForce:
        """A read that did not answer within the request's deadline (a database that
        hangs fails no call: gateway/db_rest.py): taken as an outage, its thread left
        to run on; the last cut known, else one that serves nothing."""
        self._database_away(exc)
        try:
            shipped = float(self.shipped(target))
        except Exception:  # refresh() said so already; nothing is served
            shipped = 1.0
        return self._without_labels(tenant_id, target, shipped)

    def _without_labels(self, tenant_id: str, target: float, shipped: float) -> CutInForce:
        """The last cut known for the tenant, else one that serves nothing; kept fresh for
        ``retry`` seconds (lookups use it meanwhile instead of asking again)."""
        key = (tenant_id, target)
        with self._lock:
            stale = self._cuts.get(key)
            cut = replace(stale[1], is_kept=True) if stale else _unavailable(target, shipped)
            # current() reads it as ttl - retry old: fresh for ``retry`` more seconds
            self._cuts[key] = (self._clock() - self.ttl + self.retry, cut, False)
        return cut

    def invalidate(self, *tenant_ids: str) -> None:
        """Drop the kept cuts of ``tenant_ids`` (every tenant's when none is named)."""
        with self._lock:
            for key in [k for k in self._cuts if not tenant_ids or k[0] in tenant_ids]:
                del self._cuts[key]
            for floor in [k for k in self._band_cuts if not tenant_ids or k[0] in tenant_ids]:
                del self._band_cuts[floor]
            for floor in [k for k in self._unsaved if not tenant_ids or k[0] in tenant_ids]:
                del self._unsaved[floor]
            if not tenant_ids:
                self._generation_all += 1
                self._generation.clear()  # every earlier read is stale by the line above
            for tenant_id in tenant_ids:
                self._generation[tenant_id] = self._generation.get(tenant_id, 0) + 1


def _unavailable(target: float, shipped: float) -> CutInForce:
    """A cut that serves nothing through the verifier, for want of the tenant's labels."""
    return CutInForce(
        target=target,
        cut=1.0,
        shipped_cut=shipped,
        source="unavailable",
        labelled=0,
        served=0,
        misfires=0,
        estimate=None,
        low=None,
        high=None,
    )
