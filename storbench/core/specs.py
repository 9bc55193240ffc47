"""Typed step specs: what a rule passes to its step, as JSON in ``params:``.

A spec's JSON is the rule's ``params``, so Snakemake reruns exactly the jobs whose spec
changed; ``to_json`` writes the same keys, in the same sorted order, as the plain dicts
before it did (optional keys only when set), so finished runs stay finished.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from storbench.core.model import Host


class SpecError(ValueError):
    """A spec's JSON does not fit its step (a bug or a hand-written --spec)."""


def _json(value: dict) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class RunSpec:
    """One run (one job file per host or one for all) as the run engine runs it."""

    experiment: str
    run_id: str
    tool: str
    target: dict  # the target mapping (members for a run on a target set)
    params: dict  # job options of this sweep point
    hosts: tuple[dict, ...]  # config host mappings, in run order
    timeout_s: float
    execution: str = "standalone"  # or "service"
    step: str | None = None  # client step label
    per_host_jobs: bool = False  # a job file per host (service mode, host split, host facts)
    service: dict | None = None  # {tool, port, hosts}: the campaign's services (service mode)
    faults: tuple[dict, ...] = ()  # fault commands during the workload
    preparation: dict | None = None  # dataset / recipe tokens the target must still match
    prep_state: str | None = None  # the preparation state the run is tagged with
    reprepared: tuple[str, ...] = ()  # hosts whose dataset was laid out again before the run

    OPTIONAL = ("service", "faults", "preparation", "prep_state", "reprepared")

    @classmethod
    def from_dict(cls, data: dict, *, ignore: tuple[str, ...] = ()) -> RunSpec:
        """From a spec mapping; keys in ``ignore`` belong to a wider spec (a search's)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names - set(ignore))
        if unknown:
            raise SpecError(f"run spec: unknown key(s) {', '.join(unknown)}")
        values = {key: value for key, value in data.items() if key in names}
        missing = sorted(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in values and f.default is dataclasses.MISSING
        )
        if missing:
            raise SpecError(f"run spec: missing key(s) {', '.join(missing)}")
        for key in ("hosts", "faults", "reprepared"):
            if key in values and values[key] is not None:
                values[key] = tuple(values[key])
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls.from_dict(json.loads(text))

    def to_dict(self) -> dict:
        data = {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name not in self.OPTIONAL or getattr(self, field.name)
        }
        for key in ("hosts", "faults", "reprepared"):
            if key in data:
                data[key] = list(data[key])
        return data

    def to_json(self) -> str:
        return _json(self.to_dict())

    def host_specs(self) -> list[Host]:
        return [Host.from_dict(host) for host in self.hosts]

    def with_state(self, state: dict) -> RunSpec:
        """The spec with the preparation state read back from the hosts (prep_state etc.)."""
        fields: dict = {k: tuple(v) if k == "reprepared" else v for k, v in state.items()}
        return dataclasses.replace(self, **fields)
