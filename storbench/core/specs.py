"""Typed step specs: what a rule passes to its step, as JSON in ``params:``, and the Manifest.

A spec's JSON is the rule's ``params``, so Snakemake reruns exactly the jobs whose spec
changed; ``to_json`` writes the same keys, in the same sorted order, as the plain dicts
before it did (optional keys only when set), so finished runs stay finished. ``from_dict``
refuses unknown and missing keys, naming them: a hand-written ``--spec`` with a typo fails at
once instead of running with a default.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from storbench.core.model import Host


class SpecError(ValueError):
    """A spec's JSON does not fit its step (a bug or a hand-written --spec)."""


def _json(value: dict) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# What a field's annotation (a string here) takes from JSON: its types, singular, plural.
_JSON_TYPES: dict[str, tuple[tuple[type, ...], str, str]] = {
    "str": ((str,), "a string", "strings"),
    "int": ((int,), "a whole number", "whole numbers"),
    "float": ((int, float), "a number", "numbers"),
    "bool": ((bool,), "true or false", "true or false"),
    "dict": ((dict,), "a mapping", "mappings"),
    "None": ((type(None),), "null", "null"),
}
_TUPLE_OF = re.compile(r"tuple\[(\w+), \.\.\.\]")
_FieldCheck = tuple[tuple[type, ...], str, tuple[type, ...], str]  # types, words; items' too


@functools.cache
def _field_check(annotation: str) -> _FieldCheck | None:
    """What a field takes and how to say it, None for a field that takes any value (Any)."""
    types: list[type] = []
    words: list[str] = []
    items: tuple[tuple[type, ...], str, str] = ((), "", "")
    for part in annotation.split(" | "):
        if part in _JSON_TYPES:
            part_types, word, _ = _JSON_TYPES[part]
        elif (match := _TUPLE_OF.fullmatch(part)) and match.group(1) in _JSON_TYPES:
            items = _JSON_TYPES[match.group(1)]
            part_types, word = (list, tuple), f"a list of {items[2]}"
        else:
            return None
        types.extend(part_types)
        words.append(word)
    return tuple(types), " or ".join(words), items[0], items[1]


def _type_problem(value: object, annotation: str) -> str | None:
    """What is wrong with a JSON value for a field (from its key on), None when it fits."""
    check = _field_check(annotation)
    if check is None:
        return None
    types, expected, item_types, item_expected = check
    if not _fits(value, types):
        return f" must be {expected}, not {_shown(value)}"
    if item_types and isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if not _fits(item, item_types):
                return f"[{index}] must be {item_expected}, not {_shown(item)}"
    return None


def _limit_problem(name: str, value: object) -> str | None:
    """A time limit of 0 or less (a number by now): the step would be stopped as it starts."""
    if name == "timeout_s" and isinstance(value, int | float) and not value > 0:
        return f" must be seconds above 0, not {_shown(value)}"
    return None


def _fits(value: object, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _shown(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _keys_problem(mapping: dict, types: dict[str, str], needs: tuple[str, ...] = ()) -> str | None:
    """A key of ``needs`` missing, or a value not of its key's annotation in ``types``."""
    for key in needs:
        if key not in mapping:
            return f": missing key {key}"
    for key, value in mapping.items():
        if key in types and (problem := _type_problem(value, types[key])):
            return f".{key}{problem}"
    return None


# A target mapping's keys and what each takes (the config's targets, as the steps get them).
_TARGET_KEYS = {
    "name": "str", "type": "str", "path": "str", "per_host_subdir": "bool", "capacity": "str | int",
    "endpoint": "str", "region": "str", "bucket_prefix": "str", "bucket": "str",
    "verify_tls": "bool", "credentials": "dict", "members": "tuple[dict, ...]",
}  # fmt: skip
_TARGET_NEEDS = {"directory": ("path",), "block": ("path",), "s3": ("endpoint", "credentials")}


def target_problem(target: dict) -> str | None:
    """What is wrong with a target mapping (from its first key on), None when it fits."""
    if problem := _keys_problem(target, _TARGET_KEYS, needs=("name", "type")):
        return problem
    kind = target["type"]
    if kind not in _TARGET_NEEDS:
        return f".type must be one of {', '.join(_TARGET_NEEDS)}, not {_shown(kind)}"
    if "members" in target:
        for index, member in enumerate(target["members"]):
            if problem := target_problem(member):
                return f".members[{index}]{problem}"
        return None
    missing = [key for key in _TARGET_NEEDS[kind] if key not in target]
    return f": a target of type {kind} needs {', '.join(missing)}" if missing else None


@functools.cache
def _host_fields() -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(Host)}


def host_problem(host: dict) -> str | None:
    """What is wrong with a config host mapping, None when it makes a Host."""
    given = {key: value for key, value in host.items() if value is not None}  # None: default
    if problem := _keys_problem(given, _host_fields()):
        return problem
    try:
        Host.from_dict(host)
    except (TypeError, ValueError) as error:
        return f": {error}"
    return None


def with_keys(
    kind: str, data: object, keys: dict[str, str], optional: dict[str, str] | None = None
) -> dict:
    """A spec still passed as a plain mapping (preflight, services, telemetry), once it is a
    mapping holding keys, each value of its annotation in ``keys`` ("host" and "target" for a
    config host or target mapping, "tuple[host, ...]" for a list of them), and those of
    ``optional`` it holds likewise; else SpecError as StepSpec.from_dict names what is wrong."""
    if not isinstance(data, dict):
        raise SpecError(f"{kind} spec: expected a mapping, got {type(data).__name__}")
    missing = sorted(key for key in keys if key not in data)
    if missing:
        raise SpecError(f"{kind} spec: missing key(s) {', '.join(missing)}")
    for key, annotation in {**keys, **(optional or {})}.items():
        if key in data and (problem := value_problem(data[key], annotation)):
            raise SpecError(f"{kind} spec: {key}{problem}")
    return data


_MAPPING_CHECKS = {"target": target_problem, "host": host_problem}


def value_problem(value: object, annotation: str) -> str | None:
    """What is wrong with a value for an annotation of ``with_keys`` (from its key on)."""
    match = _TUPLE_OF.fullmatch(annotation)
    mapping = annotation if annotation in _MAPPING_CHECKS else match and match.group(1)
    if mapping not in _MAPPING_CHECKS:
        return _type_problem(value, annotation)
    check = _MAPPING_CHECKS[mapping]
    if problem := _type_problem(value, "tuple[dict, ...]" if match else "dict"):
        return problem
    if isinstance(value, dict):
        return check(value)
    items: list[dict] = list(value)  # type: ignore[call-overload]
    for index, item in enumerate(items):
        if problem := check(item):
            return f"[{index}]{problem}"
    return None


class StepSpec:
    """JSON round trip for the frozen dataclasses below.

    KIND names the spec in errors; OPTIONAL fields are left out of the JSON when None or
    empty; KEYS maps a field to its JSON key where the key is a Python keyword (``pass``);
    NESTED gives the spec class of a field that holds another spec.
    """

    KIND: ClassVar[str] = "step"
    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    KEYS: ClassVar[dict[str, str]] = {}
    NESTED: ClassVar[dict[str, type[StepSpec]]] = {}
    # fields holding a target mapping, a config host mapping or a tuple of them
    TARGETS: ClassVar[tuple[str, ...]] = ()
    HOSTS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_dict(
        cls, data: dict | Self, *, ignore: tuple[str, ...] = (), planned: bool = False
    ) -> Self:
        """From a spec mapping; keys in ``ignore`` belong to a wider spec (a search's).

        Each value is checked for its type, and targets and hosts for their keys, unless the
        spec is ``planned``: made by storbench.plan from a checked config, where the checks'
        cost would be paid for every job of a campaign's plan (a host's, 128 times a run)."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise SpecError(f"{cls.KIND} spec: expected a mapping, got {type(data).__name__}")
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        by_key = {cls.KEYS.get(f.name, f.name): f for f in fields}
        unknown = sorted(set(data) - set(by_key) - set(ignore))
        if unknown:
            raise SpecError(f"{cls.KIND} spec: unknown key(s) {', '.join(unknown)}")
        missing = sorted(
            key
            for key, f in by_key.items()
            if key not in data
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        )
        if missing:
            raise SpecError(f"{cls.KIND} spec: missing key(s) {', '.join(missing)}")
        values: dict[str, Any] = {}
        for key, f in by_key.items():
            if key not in data:
                continue
            value = data[key]
            if f.name in cls.NESTED and value is not None:
                value = cls.NESTED[f.name].from_dict(value, planned=planned)
            elif not planned and (
                problem := _type_problem(value, str(f.type))
                or cls._mapping_problem(f.name, value)
                or _limit_problem(f.name, value)
            ):
                raise SpecError(f"{cls.KIND} spec: {key}{problem}")
            elif isinstance(value, list) and str(f.type).startswith("tuple"):
                value = tuple(value)
            values[f.name] = value
        if not planned and (problem := cls._whole_problem(values)):
            raise SpecError(f"{cls.KIND} spec: {problem}")
        return cls(**values)

    @classmethod
    def _whole_problem(cls, values: dict[str, Any]) -> str | None:
        """A problem between fields (each of them of its type), None for none."""
        return None

    @classmethod
    def _mapping_problem(cls, name: str, value: object) -> str | None:
        """A target or host mapping's problem, or one of a tuple of them."""
        mapping = "target" if name in cls.TARGETS else "host" if name in cls.HOSTS else None
        if mapping is None or value is None:
            return None
        return value_problem(
            value, mapping if isinstance(value, dict) else f"tuple[{mapping}, ...]"
        )

    @classmethod
    def from_json(cls, text: str) -> Self:
        return cls.from_dict(json.loads(text))

    def to_dict(self) -> dict:
        data = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name in self.OPTIONAL and (value is None or value == ()):
                continue
            if isinstance(value, StepSpec):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = list(value)
            data[self.KEYS.get(f.name, f.name)] = value
        return data

    def to_json(self) -> str:
        return _json(self.to_dict())


@dataclass(frozen=True)
class HostJobsSpec(StepSpec):
    """Every host's own job file of one run, rendered by one job (not one job per host)."""

    render: dict  # the run's RenderSpec mapping, shared by its hosts
    # per host, in run order: {host, role, params (only with a role), facts (telemetry path)}
    hosts: tuple[dict, ...]
    suffix: str  # the tool's job file suffix, with its dot

    KIND = "render_hosts"
    ENTRY_KEYS: ClassVar[dict[str, str]] = {
        "host": "str", "role": "str | None", "params": "dict", "facts": "str | None",
    }  # fmt: skip

    @classmethod
    def _mapping_problem(cls, name: str, value: object) -> str | None:
        """Each host's entry: its name, and its role, params and facts file when it has them."""
        entries: list[dict] = list(value) if name == "hosts" else []  # type: ignore[call-overload]
        for index, entry in enumerate(entries):
            if problem := _keys_problem(entry, cls.ENTRY_KEYS, needs=("host",)):
                return f"[{index}]{problem}"
        return None

    def host_specs(self) -> list[tuple[RenderSpec, str | None]]:
        """(that host's RenderSpec, its telemetry file or None) for every host."""
        found = []
        for index, entry in enumerate(self.hosts):
            mapping = {**self.render, "host": entry["host"], "host_index": index}
            mapping |= {
                "role": entry.get("role"),
                **({"params": entry["params"]} if "params" in entry else {}),
            }
            found.append((RenderSpec.from_dict(mapping), entry.get("facts")))
        return found


@dataclass(frozen=True)
class RunSpec(StepSpec):
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
    wait_s: float | None = None  # a pause before the run (the experiment's wait)

    KIND = "run"
    TARGETS = ("target",)
    HOSTS = ("hosts",)
    OPTIONAL = ("service", "faults", "preparation", "prep_state", "reprepared", "wait_s")

    def host_specs(self) -> list[Host]:
        return [Host.from_dict(host) for host in self.hosts]

    def with_state(self, state: dict) -> RunSpec:
        """The spec with the preparation state read back from the hosts (prep_state etc.)."""
        fields: dict = {k: tuple(v) if k == "reprepared" else v for k, v in state.items()}
        return dataclasses.replace(self, **fields)


@dataclass(frozen=True)
class RenderSpec(StepSpec):
    """One job file: the run's options, its sweep point, and for a per-host job the host."""

    experiment: str
    run_id: str
    tool: str
    target: dict
    params: dict
    hosts: tuple[str, ...]  # host names of the run, in run order
    point: dict  # the swept values of this run
    template: str | None = None  # a user template, else the tool's default
    job_file: str | None = None  # a ready job file, copied as it is
    execution: str = "standalone"
    host: str | None = None  # a per-host job: which host, its index, its read/write role
    host_index: int | None = None
    role: str | None = None
    storage: dict | None = None  # the storage_* names, for jobs whose expressions use them
    addresses: dict | None = None  # {host: tool address}, for jobs that name hosts differently
    users: dict | None = None  # {host: SSH user}, for jobs that name hosts, where one is set

    KIND = "render"
    TARGETS = ("target",)
    OPTIONAL = ("storage", "addresses", "users")
    PER_HOST: ClassVar[tuple[str, ...]] = ("host", "host_index", "role")

    def to_dict(self) -> dict:
        data = super().to_dict()
        if self.host is None:  # a shared job: none of the per-host keys (role may be null)
            for key in self.PER_HOST:
                data.pop(key)
        return data

    def mapping(self) -> dict:
        """The spec as a plain mapping, for templates and the adapters' template_context."""
        return self.to_dict()


@dataclass(frozen=True)
class ProbeSpec(StepSpec):
    """A search experiment: what every probe job needs; each probe sets run id and options."""

    experiment: str
    tool: str
    target: dict
    params: dict  # the experiment's job; a probe adds its iodepth and rate
    hosts: tuple[dict, ...]
    timeout_s: float
    search: dict  # the search settings, less the probe budget (the workflow's business)
    run_id: str | None = None
    execution: str = "standalone"
    step: str | None = None
    per_host_jobs: bool = False
    template: str | None = None
    job_file: str | None = None
    preparation: dict | None = None

    KIND = "search"
    TARGETS = ("target",)
    HOSTS = ("hosts",)
    OPTIONAL = ("preparation",)

    def run_spec(self, run_id: str, params: dict) -> RunSpec:
        return RunSpec(
            experiment=self.experiment,
            run_id=run_id,
            tool=self.tool,
            target=self.target,
            params=params,
            hosts=self.hosts,
            timeout_s=self.timeout_s,
            execution=self.execution,
            step=self.step,
            per_host_jobs=self.per_host_jobs,
            preparation=self.preparation,
        )

    def render_spec(self, run_id: str, params: dict, point: dict) -> RenderSpec:
        return RenderSpec(
            experiment=self.experiment,
            run_id=run_id,
            tool=self.tool,
            target=self.target,
            params=params,
            hosts=tuple(host["name"] for host in self.hosts),
            point=point,
            template=self.template,
            job_file=self.job_file,
            execution=self.execution,
        )


@dataclass(frozen=True)
class CleanupSpec(StepSpec):
    """`snakemake cleanup`: the campaign's tool services and its S3 targets with buckets."""

    services: tuple[dict, ...] = ()  # {tool, port, hosts} per tool run as a service
    buckets: tuple[dict, ...] = ()  # {target, buckets} per S3 target
    setups: tuple[dict, ...] = ()  # SetupSpec mappings whose undo cleanup runs
    connections: tuple[dict, ...] = ()  # host mappings with a persistent connection to close

    KIND = "cleanup"
    OPTIONAL = ("setups", "connections")


@dataclass(frozen=True)
class SetupSpec(StepSpec):
    """One client set-up step on one host (storbench.config.setup)."""

    step: str
    host: dict  # the config host mapping
    host_index: int  # the host's position among the step's hosts, from 0
    hosts: int  # how many hosts the step has
    command: str
    timeout_s: float
    check: str | None = None
    undo: str | None = None
    storage: dict | None = None  # the storage_* names, when the config declares storage:

    KIND = "setup"
    HOSTS = ("host",)
    OPTIONAL = ("check", "undo", "storage")


class _PreparationSpec(StepSpec):
    """A dataset's or recipe's spec: a state token path on every host."""

    @classmethod
    def _whole_problem(cls, values: dict[str, Any]) -> str | None:
        for name, path in values["tokens"].items():
            if not isinstance(path, str):
                return f"tokens.{name} must be a string (its token's path), not {_shown(path)}"
        missing = [host["name"] for host in values["hosts"] if host["name"] not in values["tokens"]]
        return f"tokens: no token path for host(s) {', '.join(missing)}" if missing else None


REGION_FILE = "storbench-region"  # a directory target's preconditioned file, on each host


@dataclass(frozen=True)
class DatasetSpec(_PreparationSpec):
    """Lay out a dataset on a target from every host (once; a token per host records it)."""

    kind: str  # "dataset"
    name: str
    target: dict
    hosts: tuple[dict, ...]
    method: str
    job: dict
    sha256: str
    timeout_s: float
    raw_dir: str
    tokens: dict  # host name -> token path on that host
    storage: dict | None = None  # storage_* names, when the job uses one

    KIND = "dataset"
    TARGETS = ("target",)
    HOSTS = ("hosts",)
    OPTIONAL = ("storage",)


@dataclass(frozen=True)
class RecipeSpec(_PreparationSpec):
    """A preconditioning recipe: what every stage job of it needs."""

    kind: str  # "precondition"
    name: str
    target: dict
    hosts: tuple[dict, ...]
    capacity: Any
    slice_bytes: Any
    job: dict
    interval_s: Any
    cliff: Any
    rounds: dict | None
    flush: Any
    timeout_s: float | None  # a configured limit comes beside the spec
    sha256: str
    dir: str
    recipe_spec: dict  # the recipe as configured (its hash is ``sha256``)
    tokens: dict
    storage: dict | None = None  # storage_* names, when a job uses one

    KIND = "recipe"
    TARGETS = ("target",)
    HOSTS = ("hosts",)
    OPTIONAL = ("storage",)


@dataclass(frozen=True)
class StageSpec(StepSpec):
    """One stage of a recipe: a purge, a chunk of a fill pass, or a round."""

    recipe: RecipeSpec
    stage: str
    kind: str  # purge, pass, round
    index: int
    round: int | None = None
    command: str | None = None  # the purge command (kind purge)
    pass_: dict | None = None  # the pass and its chunk (kind pass)

    KIND = "stage"
    OPTIONAL = ("command", "pass_")

    def pass_settings(self) -> dict:
        """The pass and chunk of a pass stage (an error for any other stage)."""
        if self.pass_ is None:
            raise SpecError(f"stage {self.stage}: a {self.kind} stage has no pass")
        return self.pass_

    KEYS = {"pass_": "pass"}
    NESTED = {"recipe": RecipeSpec}


@dataclass(frozen=True)
class Manifest(StepSpec):
    """``run.json``: what ran for one iteration (published last, only when every host succeeded)."""

    experiment: str
    run_id: str
    iteration: int
    attempt: int
    tool: str
    raw_dir: str  # the attempt folder, relative to the manifest
    job_file: str
    job_file_sha256: str
    params: dict
    target: dict
    hosts: tuple[dict, ...]  # per host: command, exit code, times, version, output files
    step: str | None = None
    prep_state: str | None = None
    reprepared: tuple[str, ...] = ()
    execution: str | None = None  # "service": a controller started the run on every host
    controller: dict | None = None  # service mode: the controller's command and output
    faults: tuple[dict, ...] = ()  # the fault commands as they ran
    release_time: str | None = None  # standalone: the instant every host was to start at
    start_skew_s: float | None = None  # latest minus earliest host start

    KIND = "manifest"
    OPTIONAL = (
        "prep_state", "reprepared", "execution", "controller", "faults", "release_time",
        "start_skew_s",
    )  # fmt: skip


def start_skew_s(hosts) -> float | None:
    """Latest minus earliest start_time of a manifest's host records; None for one host."""
    starts = [
        datetime.datetime.fromisoformat(h["start_time"]) for h in hosts if h.get("start_time")
    ]
    if len(starts) < 2:
        return None
    return (max(starts) - min(starts)).total_seconds()
