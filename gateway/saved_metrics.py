"""``cachegate_prefill_flops_saved_total`` and ``cachegate_cost_saved_usd_total``: what
each finished request saved, counted live by the misfire report's own formulas.

The report (:mod:`gateway.reports.sections`, ``savings``) sums the same quantities
over ``request_stats`` rows; both go through :func:`cost_saved_usd` and
:meth:`ModelShape.prefill_flops`, so a dashboard and a report over the same
window agree. Per request, with the report's definitions:

- a semantic hit (``layer="semantic"``) reuses its whole prompt and its completion;
- an engine-served request (prefix-hit, miss, bypass; ``layer="prefix"``) reuses its
  ``cached_tokens`` of prompt and no completion.

FLOPs need the model's shape, known only with the in-process engine; behind an
HTTP upstream the FLOPs series gets no samples and only the cost is counted.
"""

from __future__ import annotations

from gateway.metrics import GatewayMetrics
from gateway.reports.recorder import RequestRecord
from gateway.reports.sections import ENGINE_LABELS, ModelShape, cost_saved_usd


class SavedCounter:
    """Counts one :class:`RequestRecord` into the two saved series."""

    def __init__(
        self,
        metrics: GatewayMetrics,
        price_prompt: float,
        price_completion: float,
        model: ModelShape | None,
    ) -> None:
        self.metrics = metrics
        self.price_prompt, self.price_completion = price_prompt, price_completion
        self.model = model

    def count(self, record: RequestRecord) -> None:
        if record.cache == "semantic-hit":
            layer, prompt, completion = "semantic", record.prompt_tokens, record.completion_tokens
        elif record.cache in ENGINE_LABELS:
            layer, prompt, completion = "prefix", record.cached_tokens, 0
        else:
            return
        if prompt <= 0 and completion <= 0:
            return  # nothing reused: no series for a tenant that never hit a cache
        usd = cost_saved_usd(prompt, completion, self.price_prompt, self.price_completion)
        self.metrics.cost_saved_usd.labels(record.tenant_id, layer).inc(usd)
        if self.model is not None and prompt > 0:
            flops = self.model.prefill_flops(prompt)
            self.metrics.prefill_flops_saved.labels(record.tenant_id, layer).inc(flops)
