"""The misfire report's recommended threshold comes with the value to set: the score
itself under a plain embedder; under CACHEGATE_EMBEDDER=auto, whose scores are on the
routed scale, the MiniLM cosine the tenant's knob takes (the gateway maps it back)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.reports import text
from gateway.reports.sections import ReportParams, Sample, misfire_section
from semantic.embedder_routed import as_minilm_cosine, on_routed_scale

# 40 correct hits from 0.960 up and a misfire at 0.955: the point criterion recommends
# the lowest score whose samples at or above it meet the target, 0.96 (on the scale in
# force).
SAMPLES = [Sample("t", 0.955, "misfire", None)] + [
    Sample("t", 0.96 + i * 0.0009, "correct", None) for i in range(40)
]


@pytest.mark.parametrize("routed", [False, True])
def test_the_setting_is_what_the_knob_takes(routed: bool) -> None:
    p = ReportParams(target=0.01, criterion="point", routed=routed)
    rec = misfire_section(SAMPLES, p)["recommended_threshold"]
    assert rec["threshold"] == pytest.approx(0.96)
    if routed:  # 1 - 0.04 / 0.3125 = 0.872: set it, and the gateway applies 0.96 again
        assert rec["setting"] == pytest.approx(0.872)
        assert on_routed_scale(rec["setting"]) == pytest.approx(rec["threshold"])
    else:
        assert rec["setting"] == rec["threshold"]


def test_no_recommendation_has_no_setting_and_low_scores_floor_at_zero() -> None:
    p = ReportParams(routed=True)
    assert misfire_section([], p)["recommended_threshold"]["setting"] is None
    assert as_minilm_cosine(0.5) == 0.0  # no MiniLM cosine maps that low


def test_only_the_embedder_in_force_scores_the_recommendation() -> None:
    # The window spans a switch from MiniLM: its samples are MiniLM cosines, which read
    # as routed scores would recommend a far looser MiniLM setting.
    now = [replace(s, embedder_id="auto:x") for s in SAMPLES]
    before = [Sample("t", 0.86 + i * 0.0005, "correct", None, None, "minilm:y") for i in range(120)]
    before += [Sample("t", 0.85, "misfire", None, None, None)]  # taken before 0010: unknown
    p = ReportParams(target=0.01, criterion="point", routed=True, embedder_id="auto:x")
    section = misfire_section(now + before, p)
    assert section["recommended_threshold"]["threshold"] == pytest.approx(0.96)
    assert section["scores"] == {"embedder_id": "auto:x", "labelled": 41, "other_embedders": 121}
    assert len(section["labelled_scores"]["correct"]) == 40
    # the misfire rate counts every label, whatever scored it
    assert section["misfires"]["labelled"] == 162 and section["misfires"]["misfires"] == 2
    # control: read together, the MiniLM cosines pull the recommendation down
    mixed = misfire_section(now + before, replace(p, embedder_id=None))
    assert mixed["recommended_threshold"]["threshold"] == pytest.approx(0.86)


@pytest.mark.parametrize("knob", ["threshold", "retrieval_threshold"])
def test_the_recommendation_names_the_knob_in_force(knob: str) -> None:
    """With the pair verifier on (the default) lookups apply ``retrieval_threshold`` and
    ignore ``threshold``: the report used to advise "set threshold", a knob that did
    nothing there. The page and the CLI name the field in force."""
    p = ReportParams(target=0.01, criterion="point", knob=knob)
    rec = misfire_section(SAMPLES, p)["recommended_threshold"]
    assert rec["knob"] == knob
    note = text._knob_note(rec)
    if knob == "threshold":
        assert note == ""  # the score shown is what to set on the field it names
    else:
        assert note == " (set retrieval_threshold 0.9600)"


def test_the_cli_summary_shows_each_tenants_target_and_cut() -> None:
    """`cachegate report` printed no verifier section: neither a tenant's own target
    nor the cut in force (the page showed both)."""
    cut = {
        "target": 0.05,
        "cut": 0.93331,
        "shipped_cut": 0.9,
        "source": "raised",
        "labelled": 90,
        "served": 30,
        "misfires": 0,
        "estimate": 0.0,
        "low": 0.0,
        "high": 0.1135,
        "is_kept": False,
        "retrieval_threshold": 0.84,
        "labels_not_counted": 0,
    }
    lines = text.verifier_lines({"enabled": True, "tenants": {"acme": cut}})
    assert any("acme: target 5.0%" in ln and "cut 0.9333 from raised" in ln for ln in lines)
    assert text.verifier_lines({"enabled": False, "tenants": {}}) == [
        "pair verifier: off (CACHEGATE_VERIFIER=off)"
    ]
    assert text.verifier_lines(None) == []


def test_score_buckets_are_on_the_scale_the_scores_are_on() -> None:
    """On the routed scale every served hit scores above 0.93, so the fixed MiniLM edges
    (0.80 … 1.00) left seven of ten buckets empty by construction and put every sample in
    the last three. The edges are now put on the scale, and each bucket also says the
    threshold values it spans."""
    routed = ReportParams(routed=True)
    buckets = misfire_section(SAMPLES, routed)["score_buckets"]
    edges = [b["low"] for b in buckets if b["low"] is not None] + [buckets[-1]["high"]]
    assert edges == pytest.approx(
        [on_routed_scale(e) for e in (0.80 + 0.02 * i for i in range(11))]
    )
    assert buckets[0]["low"] is not None  # no bucket below 0.9375: nothing scored there
    filled = [b for b in buckets if b["n"]]
    assert len(filled) >= 2 and sum(b["n"] for b in filled) == len(SAMPLES)
    first = next(b for b in buckets if b["low"] is not None)
    assert (first["setting_low"], first["setting_high"]) == pytest.approx((0.80, 0.82))
    assert text._bucket(first) == "[0.9375,0.94375)"
    # control: under a plain embedder the edges are MiniLM's own, and say no setting
    plain = misfire_section(SAMPLES, ReportParams())["score_buckets"]
    assert [b["low"] for b in plain][:2] == pytest.approx([0.80, 0.82])
    assert plain[-1]["setting_high"] is None and text._bucket(plain[0]) == "[0.80,0.82)"
    assert sum(b["n"] for b in plain if b["low"] is not None and b["low"] >= 0.94) == len(SAMPLES)


def test_the_recommendation_weighs_samples_as_the_headline_does() -> None:
    # Near-threshold hits are sampled 3x: 300 clean ones at 0.95 (probability 0.3) and
    # 5 misfires above (0.1). Counted plainly 5 of 305 (1.6%) meet a 2% target; weighted,
    # the share of hits, 50 of 1,050 (4.8%) do not. Before session 44 the report
    # recommended 0.95 while its own headline said the traffic misfired at 4.8%.
    samples = [Sample("t", 0.95, "correct", None, 0.3) for _ in range(300)]
    samples += [Sample("t", 0.97, "misfire", None, 0.1) for _ in range(5)]
    p = ReportParams(target=0.02, criterion="point")
    section = misfire_section(samples, p)
    assert section["misfires"]["weighted"]["rate"] == pytest.approx(50 / 1050)
    assert section["recommended_threshold"]["threshold"] is None
    # the control: drawn alike (no probabilities recorded), the plain count decides
    plain = [replace(s, probability=None) for s in samples]
    assert misfire_section(plain, p)["recommended_threshold"]["threshold"] == pytest.approx(0.95)
