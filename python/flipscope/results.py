"""An experiment's results.json (docs/report.md) as typed Python objects. Every object keeps the
JSON it was read from in `.raw`, so a field added by a later flipscope is still reachable; absent
fields read as None (or empty), never as an error."""
import dataclasses
import json
import os
from typing import Optional


def _get(d, key, kind, default=None):
    v = d.get(key) if isinstance(d, dict) else None
    if kind is bool:
        return v if isinstance(v, bool) else default
    return v if isinstance(v, kind) and not isinstance(v, bool) else default  # JSON true is not a count


def _num(d, key):
    v = _get(d, key, (int, float))
    return None if v is None else float(v)


def _interval(d, key):
    v = d.get(key) if isinstance(d, dict) else None
    return (float(v[0]), float(v[1])) if isinstance(v, list) and len(v) == 2 else None


@dataclasses.dataclass
class SummaryRow:
    """One configuration over its repeats against the baseline (results.json summary[])."""
    config: str
    repeats: int
    median_flip_rate: Optional[float]
    flip_rate_ci: Optional[tuple]
    flips: Optional[int]
    probes: Optional[int]
    kl_mean: Optional[float]
    above_floor: Optional[bool]
    damage: Optional[int]
    repair: Optional[int]
    branches_followed: Optional[int]
    damage_rate: Optional[float]
    damage_rate_ci: Optional[tuple]
    raw: dict

    @classmethod
    def from_json(cls, j):
        return cls(config=_get(j, "config", str, ""), repeats=_get(j, "repeats", int, 0),
                   median_flip_rate=_num(j, "median_flip_rate"), flip_rate_ci=_interval(j, "flip_rate_ci"),
                   flips=_get(j, "flips", int), probes=_get(j, "probes", int), kl_mean=_num(j, "kl_mean"),
                   above_floor=_get(j, "above_floor", bool), damage=_get(j, "damage", int),
                   repair=_get(j, "repair", int), branches_followed=_get(j, "branches_followed", int),
                   damage_rate=_num(j, "damage_rate"), damage_rate_ci=_interval(j, "damage_rate_ci"), raw=j)


@dataclasses.dataclass
class Config:
    """One configuration as run (results.json configs[]): its knobs, status and captures."""
    name: str
    status: str
    reason: Optional[str]
    knobs: dict
    flags: Optional[str]
    captures: list
    raw: dict

    @classmethod
    def from_json(cls, j):
        return cls(name=_get(j, "name", str, ""), status=_get(j, "status", str, ""),
                   reason=_get(j, "reason", str), knobs=_get(j, "knobs", dict, {}), flags=_get(j, "flags", str),
                   captures=_get(j, "captures", list, []), raw=j)


@dataclasses.dataclass
class Recommendation:
    """The recipe (results.json recipe): the recommended configuration, why, and its commands."""
    recommended: Optional[str]
    reason: Optional[str]
    server_command: Optional[str]
    cli_command: Optional[str]
    ranking: list
    raw: dict

    @classmethod
    def from_json(cls, j):
        return cls(recommended=_get(j, "recommended", str), reason=_get(j, "reason", str),
                   server_command=_get(j, "server_command", str), cli_command=_get(j, "cli_command", str),
                   ranking=_get(j, "ranking", list, []), raw=j if isinstance(j, dict) else {})


@dataclasses.dataclass
class Results:
    """A whole results.json: name, baseline, configurations, summary rows (ranked order is the
    recipe's), the repeat floor, comparisons, branches and the recipe."""
    name: str
    baseline: str
    flipscope_version: Optional[str]
    configs: list
    summary: list
    floor: dict
    comparisons: list
    branches: list
    recipe: Recommendation
    raw: dict

    def row(self, config) -> Optional[SummaryRow]:
        """The summary row of a configuration, or None."""
        return next((r for r in self.summary if r.config == config), None)

    def config(self, name) -> Optional[Config]:
        """A configuration by name, or None."""
        return next((c for c in self.configs if c.name == name), None)


def load_results(path) -> Results:
    """Reads DIR/results.json (or a results.json path) into Results; raises ValueError naming the
    file when it is not a JSON object with flipscope's results."""
    path = os.fspath(path)
    file = os.path.join(path, "results.json") if os.path.isdir(path) else path
    try:
        with open(file, encoding="utf-8") as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{file}: not a readable results.json ({e})") from None
    if not isinstance(j, dict) or "configs" not in j:
        raise ValueError(f"{file}: not a flipscope results.json (no configs)")
    rows = [SummaryRow.from_json(r) for r in _get(j, "summary", list, []) if isinstance(r, dict)]
    return Results(name=_get(j, "name", str, ""), baseline=_get(j, "baseline", str, ""),
                   flipscope_version=_get(j, "flipscope_version", str),
                   configs=[Config.from_json(c) for c in _get(j, "configs", list, []) if isinstance(c, dict)],
                   summary=rows, floor=_get(j, "floor", dict, {}), comparisons=_get(j, "comparisons", list, []),
                   branches=_get(j, "branches", list, []), recipe=Recommendation.from_json(_get(j, "recipe", dict, {})),
                   raw=j)

