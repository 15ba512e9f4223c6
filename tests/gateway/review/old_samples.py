"""A labelled misfire sample with a verifier score, as the sampler writes one: for the
tests of score scales (which model's scores count for a tenant's cut)."""

from __future__ import annotations

from gateway.models import MisfireSample
from gateway.tenants import utc_now


def old_sample(
    tenant: str, question: str, matched: str, model: str | None, label: str = "correct"
) -> MisfireSample:
    """A sample of ``tenant`` scored 0.99 on the score scale ``model``."""
    return MisfireSample(
        tenant_id=tenant,
        created_at=utc_now(),
        request_id="r",
        entry_id=None,
        partition_key="p",
        question=question,
        matched_question=matched,
        served_answer="a",
        score=0.95,
        threshold=0.84,
        verifier_score=0.99,
        verifier_model=model,
        label=label,
    )
