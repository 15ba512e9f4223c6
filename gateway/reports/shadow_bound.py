"""What shadow verification says about a tenant's verifier cut: a conservative upper
bound on its misfire rate, for the report's verifier section.

Shadow verification (gateway/review/shadow.py) asks the model again for a sampled
hit and compares the two answers. Its two verdicts are not equally informative,
measured on question pairs standing in for answers (docs/misfire_reports.md):
``agree`` came for at most 0.06% of pairs of different meaning, so a hit the shadow
agrees with is taken as correct; ``disagree`` came for 52–72% of pairs of the same
meaning (a model's answers vary), so it is no evidence of a misfire. Counting every
``disagree`` as a misfire therefore over-counts them: the rate so counted bounds
the true one from above, and its 95% Wilson upper bound is an upper bound on the
misfire rate of the hits the cut serves, with no reviewer at all.

That is why shadow verdicts never move the cut (gateway/calibration.py): raising it
on ``disagree`` would raise it on answers that merely vary, and labels never lower
it. They bound it: a tenant without reviewers still sees how wrong its hits can be
at most. A human label, where there is one, replaces the shadow verdict.

Samples count as the calibration's do: a verifier score that is a probability, on a
score scale in force, above the cut; each weighted by 1 / the probability it was
sampled with (plain counts when any lacks one).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from gateway.calibration import recorded_probability
from gateway.models import MisfireSample
from gateway.reports.stats import weighted_wilson


@dataclass(frozen=True)
class ShadowBound:
    """``checked`` hits above the cut with a human label or a shadow verdict, of which
    ``by_shadow`` rest on the shadow alone; ``counted`` were counted as misfires
    (human misfires and shadow disagreements); ``high``: the 95% upper bound on the
    misfire rate (weighted), at least the true rate's bound."""

    checked: int
    by_shadow: int
    counted: int
    rate: float
    high: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def shadow_bound(
    db: Engine, tenant_id: str, verifier_models: Collection[str], cut: float
) -> ShadowBound | None:
    """The bound over the tenant's sampled hits the cut serves; None when none of them
    carries a shadow verdict (a bound from human labels alone is the cut's own
    estimate, shown beside it)."""
    statement = select(
        MisfireSample.verifier_score,
        MisfireSample.label,
        MisfireSample.shadow_verdict,
        MisfireSample.entity_comparison,
    ).where(
        MisfireSample.tenant_id == tenant_id,
        MisfireSample.verifier_score.is_not(None),
        MisfireSample.verifier_model.in_(list(verifier_models)),
        MisfireSample.verifier_score > cut,
    )
    with Session(db) as s:
        rows = s.execute(statement).all()
    outcomes: list[tuple[bool, bool, float | None]] = []  # misfire, by shadow, probability
    for score, label, verdict, comparison in rows:
        if score is None or not math.isfinite(score) or not 0.0 <= score <= 1.0:
            continue
        if label in ("correct", "misfire"):
            outcomes.append((label == "misfire", False, recorded_probability(comparison)))
        elif verdict in ("agree", "disagree"):
            outcomes.append((verdict == "disagree", True, recorded_probability(comparison)))
    by_shadow = sum(shadow for _, shadow, _ in outcomes)
    if not by_shadow:
        return None
    plain = any(p is None for _, _, p in outcomes)
    weights = [1.0 if plain or p is None else 1.0 / p for _, _, p in outcomes]
    sum_w = sum(weights)
    sum_wm = sum(w for w, (m, _, _) in zip(weights, outcomes, strict=True) if m)
    interval = weighted_wilson(sum_wm, sum_w, sum(w * w for w in weights))
    if interval is None:
        return None
    return ShadowBound(
        checked=len(outcomes),
        by_shadow=by_shadow,
        counted=sum(m for m, _, _ in outcomes),
        rate=interval[0],
        high=interval[2],
    )
