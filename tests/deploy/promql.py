"""Just enough PromQL reading for the deploy tests: which series an expression
selects, with which label matchers, and which labels it groups by.

Not a parser: it removes what can never be a series name (string literals,
Grafana variables, numbers, range and offset durations), then takes every
identifier that is neither a function call, a keyword nor a grouping label.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"

# Aggregation operators, set and binary keywords, modifiers: none of them is a series,
# and an aggregation may be followed by `by (...)` rather than by `(`.
_AGGREGATIONS = "sum min max avg group stddev stdvar count count_values bottomk topk quantile"
_OTHERS = "limitk limit_ratio by without on ignoring group_left group_right and or unless bool"
KEYWORDS = frozenset(f"{_AGGREGATIONS} {_OTHERS} offset atan2".split(" "))
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_VARIABLE = re.compile(r"\$\{?\w+\}?")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_MATCHERS = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_NUMBER = re.compile(r"(?<![\w:])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?:ms|s|m|h|d|w|y)?\b")
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


@dataclass
class Reading:
    """What one expression refers to."""

    series: set[str] = field(default_factory=set)
    # (series, label) for every matcher written as series{label="..."}
    matchers: set[tuple[str, str]] = field(default_factory=set)
    grouping: set[str] = field(default_factory=set)  # labels of by/without/on/ignoring


def read(expr: str) -> Reading:
    out = Reading()
    text = _VARIABLE.sub("", _STRING.sub('""', expr))
    text = _RANGE.sub("", text)
    for match in _GROUPING.finditer(text):
        out.grouping |= {lab.strip() for lab in match.group(2).split(",") if lab.strip()}
    text = _GROUPING.sub(" ", text)
    for match in _MATCHERS.finditer(text):
        name = match.group(1)
        labels = set(_MATCHER_LABEL.findall(match.group(2)))
        if name:
            out.matchers |= {(name, lab) for lab in labels}
    text = _MATCHERS.sub(lambda m: f" {m.group(1) or ''} ", text)
    text = _NUMBER.sub(" ", text)
    for match in _IDENT.finditer(text):
        name = match.group(0)
        rest = text[match.end() :].lstrip()
        if name in KEYWORDS or rest.startswith("("):
            continue
        out.series.add(name)
    return out


def dashboard_exprs(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, expression) of every query in the dashboard, rows included."""

    def walk(panels: Iterable[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            for target in panel.get("targets", []):
                yield panel.get("title", "?"), str(target["expr"])
            yield from walk(panel.get("panels", []))

    yield from walk(dashboard.get("panels", []))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if isinstance(query, str):
            # label_values(series, label): only the series is PromQL.
            inner = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query.strip())
            yield f"variable {variable['name']}", inner.group(1) if inner else query


def alert_exprs(rules: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for group in rules["groups"]:
        for rule in group["rules"]:
            yield rule.get("alert") or rule.get("record"), str(rule["expr"])


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def all_exprs() -> list[tuple[str, str]]:
    """Every PromQL expression of the dashboard and of the alert rules."""
    import json

    dashboard = json.loads((DEPLOY / "grafana" / "cachegate.json").read_text(encoding="utf-8"))
    rules = load_yaml(DEPLOY / "prometheus" / "alerts.yml")
    return [*dashboard_exprs(dashboard), *alert_exprs(rules)]
