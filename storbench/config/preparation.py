"""Datasets and preconditioning recipes: validation and the stages they expand into.

A dataset is a set of files laid out once per (target, dataset) and reused by every experiment
that names it. A recipe is an ordered chain of stages on a target's *region* (the block device,
or one file ``storbench-region`` in each host's directory):

- ``purge``: a command on every host;
- overwrite passes ``p<n>-<name>-r<repeat>[-c<chunk>]``: a fraction of the capacity, split into
  chunks of at most ``chunk`` bytes per host so a day-long pass resumes at its chunk;
- SNIA rounds ``round-01`` … ``round-25``: the round workload until steady state (a round
  after steady state is skipped without I/O);
- then ``prepared`` (verdict, write cliffs, state tokens) and an optional cache ``flush``.

The capacity is split evenly across the recipe's hosts: host i writes bytes
[i*slice, (i+1)*slice) of a block device, or a region file of ``slice`` bytes in its own
directory. Every stage is its own Snakemake job with an atomic marker under
``results/targets/<target>/``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from storbench.config.sweep import PlanError, run_id, sweep_points
from storbench.core import hostfacts, units
from storbench.core.specs import REGION_FILE

STATE_DIR = ".storbench"
ALIGN = 1 << 20  # slices and chunks are whole MiB, so every common block size divides them
DEFAULT_CHUNK_TIMEOUT_S = 24 * 3600.0
DEFAULT_FLUSH_POLL_S = 10.0
DEFAULT_FLUSH_TIMEOUT_S = 3600.0
LAYOUT_OPTIONS = ("size", "filesize", "nrfiles", "filename_format")
PASS_FORBIDDEN = ("numjobs", "rw", "bs", "size", "io_size", "offset", "filename", "runtime")
# Names an expression may use without the host's telemetry.
TELEMETRY_FREE = frozenset({"hosts", "host_index", *hostfacts.STORAGE_NAMES})


def names_used(*jobs: dict) -> set[str]:
    """The host-fact and storage names the expressions of these job options use."""
    return {name for job in jobs for value in job.values() for name in hostfacts.used_names(value)}


@dataclass(frozen=True)
class Dataset:
    name: str
    target_name: str
    target: dict
    hosts: tuple[dict, ...]
    method: str  # 'layout' (fio create_only) or 'write'
    job: dict
    timeout_s: float
    storage: dict = field(default_factory=dict)  # storage_* names, when the job uses one

    @property
    def sha256(self) -> str:
        return _digest({"target": self.target, "method": self.method, "job": self.job})

    @property
    def needs_telemetry(self) -> bool:
        """A job value computed from each host's facts ({cores}, {mem})."""
        return bool(names_used(self.job) - TELEMETRY_FREE)

    def layout_options(self) -> dict:
        """What an experiment on the dataset needs to find its files."""
        options = {k: v for k, v in self.job.items() if k in LAYOUT_OPTIONS or k == "numjobs"}
        options.setdefault("filename_format", f"{self.name}.$jobnum.$filenum")
        return options


@dataclass(frozen=True)
class Pass:
    name: str
    number: int
    fraction: float
    bs: int  # the largest block size: chunks and passes are whole multiples of it
    pattern: str
    repeat: int
    compressibility: int | None
    bs_mix: dict | None = None  # {"bsrange": "4k-16k"} or {"bssplit": "4k/50:16k/50"}
    until_cliff: bool = False  # repeat only until a write cliff was seen (at most repeat times)
    targets: tuple[dict, ...] = ()  # other targets written together; () = the recipe's target


@dataclass(frozen=True)
class Rounds:
    job: dict
    sweep: dict
    track: tuple[dict, ...]
    window: int
    max_rounds: int
    range_limit: float
    slope_limit: float

    def elements(self) -> list[tuple[str, dict]]:
        """(element id, fio options) per sweep point, in sweep order."""
        points = sweep_points(self.sweep) if self.sweep else [{}]
        elements = []
        for point in points:
            params = {**self.job, **point}
            elements.append((run_id(params, point), params))
        return elements


@dataclass(frozen=True)
class Stage:
    stage_id: str
    kind: str  # 'purge' | 'pass' | 'round'
    index: int
    pass_: Pass | None = None
    repeat: int = 1
    chunk: int = 1
    chunks: int = 1
    round: int = 0


@dataclass(frozen=True)
class Recipe:
    name: str
    target_name: str
    target: dict
    hosts: tuple[dict, ...]
    capacity: int
    job: dict
    purge: str | None
    passes: tuple[Pass, ...]
    chunk: int | None
    interval_s: float
    cliff: dict
    rounds: Rounds | None
    flush: dict | None
    timeout_s: float | None
    raw: dict = field(default_factory=dict)
    storage: dict = field(default_factory=dict)  # storage_* names, when a job uses one

    @property
    def needs_telemetry(self) -> bool:
        """A job value computed from each host's facts ({cores}, {mem})."""
        return bool(names_used(*self.jobs) - TELEMETRY_FREE)

    @property
    def jobs(self) -> tuple[dict, ...]:
        return (self.job, self.rounds.job) if self.rounds else (self.job,)

    @property
    def sha256(self) -> str:
        recipe = without_limits(self.raw)
        return _digest({"recipe": recipe, "capacity": self.capacity, "target": self.target})

    @property
    def slice_bytes(self) -> int:
        """Bytes of the region each host preconditions."""
        return self.capacity // len(self.hosts) // ALIGN * ALIGN

    def pass_bytes(self, pass_: Pass) -> int:
        return int(self.slice_bytes * pass_.fraction) // pass_.bs * pass_.bs

    def chunk_count(self, pass_: Pass) -> int:
        size = self.chunk_bytes(pass_)
        return max(1, -(-self.pass_bytes(pass_) // size))

    def chunk_bytes(self, pass_: Pass) -> int:
        if not self.chunk:
            return max(self.pass_bytes(pass_), pass_.bs)
        return max(pass_.bs, self.chunk // pass_.bs * pass_.bs)

    @property
    def target_names(self) -> tuple[str, ...]:
        """Every target the recipe writes (its own and those its passes name), in order."""
        names = [self.target_name]
        for pass_ in self.passes:
            names += [t["name"] for t in pass_.targets if t["name"] not in names]
        return tuple(names)

    def stages(self) -> list[Stage]:
        stages: list[Stage] = []
        if self.purge:
            stages.append(Stage("purge", "purge", 0))
        for pass_ in self.passes:
            chunks = self.chunk_count(pass_)
            for repeat in range(1, pass_.repeat + 1):
                for chunk in range(1, chunks + 1):
                    stage_id = f"p{pass_.number}-{pass_.name}-r{repeat}"
                    if chunks > 1:
                        stage_id += f"-c{chunk}"
                    stages.append(Stage(stage_id, "pass", 0, pass_, repeat, chunk, chunks))
        if self.rounds:
            width = max(2, len(str(self.rounds.max_rounds)))
            for number in range(1, self.rounds.max_rounds + 1):
                stages.append(Stage(f"round-{number:0{width}d}", "round", 0, round=number))
        return [
            Stage(s.stage_id, s.kind, i, s.pass_, s.repeat, s.chunk, s.chunks, s.round)
            for i, s in enumerate(stages, start=1)
        ]


def without_limits(raw: dict) -> dict:
    """A recipe as configured, less its time limits (its timeout, its flush's poll and
    timeout): a new limit prepares nothing again."""
    recipe = {key: value for key, value in raw.items() if key != "timeout"}
    if isinstance(raw.get("flush"), dict):
        recipe["flush"] = {k: v for k, v in raw["flush"].items() if k not in ("poll", "timeout")}
    return recipe


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


# --- loading (called from config.campaign.load_campaign) ------------------------------------------


def load(
    raw: dict, host_groups: dict, problems: list[str], storage: dict | None = None
) -> tuple[dict, dict]:
    """(datasets, recipes) by name; problems get one '<key>: <problem>' line each.

    ``storage``: the campaign's storage_* names (empty without a storage: section)."""
    storage = storage or {}
    datasets = {
        name: dataset
        for name, spec in (raw.get("datasets") or {}).items()
        if (dataset := _dataset(name, spec, raw, host_groups, problems, storage)) is not None
    }
    recipes = {
        name: recipe
        for name, spec in (raw.get("preconditioning") or {}).items()
        if (recipe := _recipe(name, spec, raw, host_groups, problems, storage)) is not None
    }
    return datasets, recipes


def _users(raw: dict, key: str, name: str) -> list[str]:
    return [e for e, spec in raw["experiments"].items() if spec.get(key) == name]


def _hosts(key: str, spec: dict, users: list[str], raw: dict, host_groups: dict, problems):
    """Explicit host groups, else every host of the experiments naming it, in config order."""
    groups = spec.get("hosts")
    if groups is None:
        groups = []
        for experiment in users:
            named = raw["experiments"][experiment]["hosts"]
            groups += [named] if isinstance(named, str) else list(named)
    elif isinstance(groups, str):
        groups = [groups]
    hosts: dict[str, dict] = {}
    unknown = [group for group in groups if group not in host_groups]
    problems += [f"{key}.hosts: unknown host group {group!r}" for group in unknown]
    for group in groups:
        hosts.update((host["name"], host) for host in host_groups.get(group, []))
    if not hosts and not unknown:
        problems.append(f"{key}: no experiment names it and it has no 'hosts'")
    return tuple(hosts.values())


def _target(key: str, spec: dict, raw: dict, problems: list[str]) -> dict | None:
    name = spec["target"]
    if name not in raw["targets"]:
        problems.append(
            f"{key}.target: unknown target {name!r} (defined: {', '.join(raw['targets'])})"
        )
        return None
    return {"name": name, **raw["targets"][name]}


def _dataset(name, spec, raw, host_groups, problems, storage) -> Dataset | None:
    key = f"datasets.{name}"
    before = len(problems)
    target = _target(key, spec, raw, problems)
    if target is not None and target["type"] != "directory":
        problems.append(
            f"{key}.target: a dataset lays out files in a directory target, "
            f"{spec['target']!r} is {target['type']}"
        )
    hosts = _hosts(key, spec, _users(raw, "dataset", name), raw, host_groups, problems)
    job = dict(spec["job"])
    if "size" not in job and "filesize" not in job:
        problems.append(f"{key}.job: needs size (per job) or filesize")
    for option in ("rw", "runtime", "time_based", "filename", "directory"):
        if option in job:
            problems.append(f"{key}.job.{option}: storbench sets it for a dataset")
    _check_sizes(f"{key}.job", job, problems)
    used_storage = _check_expressions(f"{key}.job", job, storage, problems)
    timeout = _duration(f"{key}.timeout", spec.get("timeout"), problems)
    if timeout is None:
        timeout = DEFAULT_CHUNK_TIMEOUT_S
    if len(problems) > before or target is None:
        return None
    method = spec.get("method", "layout")
    return Dataset(name, spec["target"], target, hosts, method, job, timeout, used_storage)


def _check_expressions(key: str, job: dict, storage: dict, problems: list[str]) -> dict:
    """Host-fact expressions are checked now, computed per host when the job runs.

    Returns the campaign's storage_* names when the job uses one (they need storage:).
    """
    problems += hostfacts.check(job, key)
    used = sorted(names_used(job) & set(hostfacts.STORAGE_NAMES))
    if not used:
        return {}
    if not storage:
        problems.append(f"{key}: {used[0]} needs the storage cluster declared in storage:")
    return storage


def _recipe(name, spec, raw, host_groups, problems, storage) -> Recipe | None:
    key = f"preconditioning.{name}"
    before = len(problems)
    target = _target(key, spec, raw, problems)
    hosts = _hosts(key, spec, _users(raw, "precondition", name), raw, host_groups, problems)
    if target is not None and target["type"] == "s3":
        problems.append(f"{key}.target: preconditioning writes a device or files, not S3")
    if (
        target is not None
        and target["type"] == "directory"
        and not target.get("per_host_subdir", True)
        and len(hosts) > 1
    ):
        problems.append(
            f"{key}.target: hosts sharing one directory (per_host_subdir: false) "
            "would write the same region file; keep per-host subdirectories"
        )
    capacity_value = spec.get("capacity", (target or {}).get("capacity"))
    from_target = "capacity" not in spec and capacity_value is not None
    capacity_key = f"targets.{spec['target']}.capacity" if from_target else f"{key}.capacity"
    writes = any(part in spec for part in ("passes", "wipc", "rounds"))
    if writes or capacity_value is not None:
        capacity = _size(
            capacity_key,
            capacity_value,
            problems,
            missing="needs a capacity (here or on the target)",
        )
        if capacity == 0 and writes:
            problems.append(
                f"{capacity_key}: must be more than 0 for {key} to write, not {capacity_value!r}"
            )
            capacity = None
    else:  # a flush-only (or purge-only) recipe writes nothing
        capacity = 0
    job = dict(spec.get("job") or {})
    for option in PASS_FORBIDDEN:
        if option in job:
            problems.append(f"{key}.job.{option}: set per pass or in rounds.job, not for all")
    passes = []
    if "wipc" in spec:
        wipc = spec["wipc"]
        bs = _block_size(f"{key}.wipc.bs", wipc.get("bs", "128k"), problems)
        passes.append(Pass("wipc", 1, 1.0, bs or 131072, "sequential", wipc.get("repeat", 2), None))
    for index, item in enumerate(spec.get("passes") or []):
        where = f"{key}.passes[{index}]"
        try:
            fraction = units.parse_percent(item["fraction"])
        except units.UnitError as error:
            problems.append(f"{where}.fraction: {error}")
            continue
        bs, mix = _block_sizes(f"{where}.bs", item["bs"], problems)
        pass_targets = _pass_targets(where, item, target, capacity_value, raw, problems)
        if bs:
            passes.append(
                Pass(
                    item["name"],
                    len(passes) + 1,
                    fraction,
                    bs,
                    item.get("pattern", "sequential"),
                    item.get("repeat", 1),
                    item.get("compressibility"),
                    mix,
                    item.get("until") == "cliff",
                    pass_targets,
                )
            )
    names = [p.name for p in passes]
    for duplicate in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{key}.passes: pass name {duplicate!r} is used twice")
    chunk = _size(f"{key}.chunk", spec["chunk"], problems) if "chunk" in spec else None
    if chunk is not None and chunk < ALIGN:
        problems.append(f"{key}.chunk: at least 1MiB")
    interval = _duration(f"{key}.interval", spec.get("interval", 1), problems)
    if interval is not None and (interval < 1 or interval != int(interval)):
        problems.append(f"{key}.interval: fio reports whole seconds, at least 1s")
    cliff = dict(spec.get("cliff") or {})
    if "plateau" in cliff:
        cliff["plateau_s"] = _duration(f"{key}.cliff.plateau", cliff.pop("plateau"), problems)
    rounds = _rounds(f"{key}.rounds", spec["rounds"], problems) if "rounds" in spec else None
    flush = _flush(f"{key}.flush", spec["flush"], hosts, problems) if "flush" in spec else None
    steps = ("wipc", "rounds", "purge", "flush")  # a step refused above is named there
    if not spec.get("passes") and not any(step in spec for step in steps):
        problems.append(f"{key}: nothing to do (give passes, wipc, rounds, purge or flush)")
    if capacity and hosts and capacity // len(hosts) < ALIGN:
        problems.append(f"{key}.capacity: at least 1MiB per host ({len(hosts)} hosts)")
    for pass_ in passes:
        if (
            capacity
            and hosts
            and (capacity // len(hosts) // ALIGN * ALIGN) * pass_.fraction < pass_.bs
        ):
            problems.append(f"{key}.passes: pass {pass_.name!r} is smaller than one block")
    timeout = _duration(f"{key}.timeout", spec["timeout"], problems) if "timeout" in spec else None
    used_storage = _check_expressions(f"{key}.job", job, storage, problems)
    if rounds is not None:
        rounds_storage = _check_expressions(f"{key}.rounds.job", rounds.job, storage, problems)
        used_storage = used_storage or rounds_storage
    if len(problems) > before or target is None or capacity is None or interval is None:
        return None
    return Recipe(
        name=name,
        target_name=spec["target"],
        target=target,
        hosts=hosts,
        capacity=capacity,
        job=job,
        purge=spec.get("purge"),
        passes=tuple(passes),
        chunk=chunk,
        interval_s=interval,
        cliff=cliff,
        rounds=rounds,
        flush=flush,
        timeout_s=timeout,
        raw=spec,
        storage=used_storage,
    )


def _pass_targets(where, item, recipe_target, capacity, raw, problems) -> tuple[dict, ...]:
    """The targets a pass writes when it names its own (each as the recipe's region)."""
    if "target" not in item:
        return ()
    names = [item["target"]] if isinstance(item["target"], str) else list(item["target"])
    found = []
    for index, name in enumerate(names):
        key = f"{where}.target" + (f"[{index}]" if not isinstance(item["target"], str) else "")
        if name not in raw["targets"]:
            problems.append(
                f"{key}: unknown target {name!r} (defined: {', '.join(raw['targets'])})"
            )
            continue
        target = {"name": name, **raw["targets"][name]}
        if recipe_target is not None and target["type"] != recipe_target["type"]:
            problems.append(
                f"{key}: {name!r} is a {target['type']} target, the recipe's is "
                f"{recipe_target['type']}"
            )
        own = target.get("capacity")
        try:
            if own and capacity and units.parse_size(own) < units.parse_size(capacity):
                problems.append(
                    f"{key}: {name!r} holds {own}, under the recipe's capacity {capacity}"
                )
        except units.UnitError:
            pass  # the capacity itself is reported where it is set
        found.append(target)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    problems += [f"{where}.target: {name!r} is named twice" for name in duplicates]
    return tuple(found)


def _rounds(key: str, spec: dict, problems: list[str]) -> Rounds | None:

    job = dict(spec["job"])
    if "runtime" not in job:
        problems.append(f"{key}.job.runtime: a round element runs for a fixed time (e.g. 60s)")
    for option in ("filename", "directory", "size", "offset"):
        if option in job:
            problems.append(f"{key}.job.{option}: a round works on the recipe's region")
    try:
        range_limit = units.parse_percent(spec.get("range", "20%"))
        slope_limit = units.parse_percent(spec.get("slope", "10%"))
    except units.UnitError as error:
        problems.append(f"{key}: {error}")
        return None
    sweep = dict(spec.get("sweep") or {})
    try:
        points = sweep_points(sweep) if sweep else [{}]
    except PlanError as error:
        problems.append(f"{key}.sweep: {error}")
        return None
    elements = [run_id({**job, **point}, point) for point in points]
    track = tuple(
        {"element": t["element"], "metric": t.get("metric", "iops")}
        for t in spec.get("track") or [{"element": elements[0]}]
    )
    for index, item in enumerate(track):
        if item["element"] not in elements:
            problems.append(
                f"{key}.track[{index}].element: no element {item['element']!r} "
                f"(elements: {', '.join(elements)})"
            )
    window = spec.get("window", 5)
    max_rounds = spec.get("max_rounds", 25)
    if max_rounds < window:
        problems.append(f"{key}.max_rounds: {max_rounds} is fewer than the window ({window})")
    return Rounds(job, sweep, track, window, max_rounds, range_limit, slope_limit)


def _flush(key: str, spec: dict, hosts, problems: list[str]) -> dict:
    flush: dict = {"method": "wait" if "wait" in spec else "command"}
    if "wait" in spec:
        flush["wait_s"] = _duration(f"{key}.wait", spec["wait"], problems)
        return flush
    names = [host["name"] for host in hosts]
    host = spec.get("host", names[0] if names else None)
    if host not in names:
        problems.append(
            f"{key}.host: {host!r} is not one of the recipe's hosts ({', '.join(names)})"
        )
    if "done" in spec:
        try:
            re.compile(spec["done"])
        except re.error as error:
            problems.append(f"{key}.done: not a regular expression: {error}")
    flush.update(
        command=spec["command"],
        host=host,
        done=spec.get("done"),
        poll_s=_duration(f"{key}.poll", spec.get("poll", DEFAULT_FLUSH_POLL_S), problems),
        timeout_s=_duration(
            f"{key}.timeout", spec.get("timeout", DEFAULT_FLUSH_TIMEOUT_S), problems
        ),
    )
    return flush


def _block_sizes(key: str, value, problems: list[str]) -> tuple[int | None, dict | None]:
    """(largest block size, fio's mix option or None) of a pass's bs."""
    text = str(value)
    if ":" in text or "/" in text:
        sizes, shares = [], []
        for part in text.split(":"):
            size_text, _, share = part.partition("/")
            size = _block_size(key, size_text, problems, written=text)
            if size is None or not share.isdigit():
                problems.append(f"{key}: {text!r} is not a split such as 4k/50:16k/50")
                return None, None
            sizes.append(size)
            shares.append(int(share))
        if sum(shares) != 100:
            problems.append(f"{key}: the split's percentages add up to {sum(shares)}, not 100")
            return None, None
        return max(sizes), {"bssplit": text}
    if "-" in text:
        low, high = (_block_size(key, part, problems, text) for part in text.split("-", 1))
        if low is None or high is None:
            return None, None
        if low > high:
            problems.append(f"{key}: the range {text!r} ends below its start")
            return None, None
        return high, {"bsrange": text}
    return _block_size(key, value, problems), None


def _block_size(key: str, value, problems: list[str], written=None) -> int | None:
    """A pass's block size (of the range or split written): 0 would drop the pass."""
    size = _size(key, value, problems)
    if size == 0:
        problems.append(f"{key}: a block size must be more than 0: {written or value!r}")
        return None
    return size


def _size(key: str, value, problems: list[str], missing: str = "is required") -> int | None:
    if value is None:
        problems.append(f"{key}: {missing}")
        return None
    try:
        return units.parse_size(value)
    except units.UnitError as error:
        problems.append(f"{key}: {error}")
        return None


def _duration(key: str, value, problems: list[str]) -> float | None:
    if value is None:
        return None
    try:
        seconds = units.parse_duration(value)
    except units.UnitError as error:
        problems.append(f"{key}: {error}")
        return None
    if seconds <= 0 and not key.endswith(".interval"):
        problems.append(f"{key}: must be more than 0s")
    return seconds


def _check_sizes(key: str, job: dict, problems: list[str]) -> None:
    for option in ("size", "filesize", "bs"):
        if hostfacts.has_expression(job.get(option)):
            continue  # computed per host (hostfacts.check looks at it)
        if option in job and not str(job[option]).endswith("%"):
            _size(f"{key}.{option}", job[option], problems)


# --- experiments on prepared targets -----------------------------------------------------------


def experiment_job(
    name: str,
    spec: dict,
    job: dict,
    datasets: dict,
    recipes: dict,
    target_name: str,
    problems: list[str],
) -> dict:
    """The experiment's job options with the dataset's layout or the recipe's region applied."""
    key = f"experiments.{name}"
    if "dataset" in spec:
        dataset = _named(
            f"{key}.dataset", "dataset", datasets, spec["dataset"], target_name, problems
        )
        if dataset is None:
            return job
        layout = dataset.layout_options()
        for where, option, value in _option_values(spec, job):
            if option in layout and option in LAYOUT_OPTIONS:
                _check_same(f"{key}.{where}", option, value, layout[option], dataset.name, problems)
        _check_numjobs(key, spec, job, layout, dataset.name, problems)
        job = {**layout, **job}
    if "precondition" in spec:
        recipe = _named(
            f"{key}.precondition", "recipe", recipes, spec["precondition"], target_name, problems
        )
        if recipe is None:
            return job
        if spec.get("flush") and recipe.flush is None:
            problems.append(f"{key}.flush: recipe {recipe.name!r} has no flush")
        writes = recipe.passes or recipe.rounds
        if recipe.target["type"] == "directory" and "dataset" not in spec and writes:
            job = {"filename": REGION_FILE, "size": recipe.slice_bytes, **job}
    elif "flush" in spec:
        problems.append(f"{key}.flush: only with a precondition recipe")
    return job


def _named(where: str, kind: str, table: dict, name: str, target_name: str, problems: list[str]):
    """The dataset or recipe an experiment names; it must be on the experiment's target."""
    item = table.get(name)
    if item is None:
        defined = f" (defined: {', '.join(table)})" if table else ""
        problems.append(f"{where}: unknown {kind} {name!r}{defined}")
    elif item.target_name != target_name:
        problems.append(
            f"{where}: {kind} {name!r} is for target {item.target_name!r}, "
            f"the experiment runs on {target_name!r}"
        )
    return item


def _option_values(spec: dict, job: dict):
    """(key path, option, value) of every job option and every swept value (zip included)."""
    for option, value in job.items():
        yield f"job.{option}", option, value
    sweep = spec.get("sweep") or {}
    for option, values in sweep.items():
        lists = values.items() if option == "zip" else [(option, values)]
        prefix = "sweep.zip" if option == "zip" else "sweep"
        for name, listed in lists:
            for index, value in enumerate(listed):
                yield f"{prefix}.{name}[{index}]", name, value


def _check_same(where: str, option: str, value, prepared, dataset: str, problems) -> None:
    if not _same_value(option, value, prepared):
        problems.append(
            f"{where}: {value!r} differs from dataset {dataset!r} ({prepared!r}); leave it out"
        )


def _same_value(option: str, value, prepared) -> bool:
    if option in ("size", "filesize"):
        try:
            return units.parse_size(value) == units.parse_size(prepared)
        except units.UnitError:
            pass
    return str(value) == str(prepared)


def _check_numjobs(key, spec, job, layout, dataset_name, problems) -> None:
    if hostfacts.has_expression(layout.get("numjobs")):
        return  # computed per host: an experiment asking for more jobs finds no files at run time
    if not str(layout.get("numjobs", 1)).isdigit():
        return  # not a count: the dataset's own numjobs is reported
    prepared = int(layout.get("numjobs", 1))
    wanted = [value for _, option, value in _option_values(spec, job) if option == "numjobs"]
    for value in wanted:
        if str(value).isdigit() and int(value) > prepared:
            problems.append(
                f"{key}: numjobs {value} needs files that dataset {dataset_name!r} "
                f"lays out for {prepared} job(s); raise its numjobs"
            )


def flush_phase(experiment_spec: dict, recipe: Recipe | None) -> str | None:
    """'before' or 'after' the recipe's flush, or None when there is no flush."""
    if recipe is None or recipe.flush is None:
        return None
    return experiment_spec.get("flush", "after")


def state_label(experiment_spec: dict, recipe: Recipe | None) -> str | None:
    parts = []
    if "dataset" in experiment_spec:
        parts.append(f"dataset {experiment_spec['dataset']}")
    if recipe is not None:
        phase = flush_phase(experiment_spec, recipe)
        parts.append(recipe.name + (f", {phase} flush" if phase else ""))
    return "; ".join(parts) or None


# --- paths and specs ----------------------------------------------------------------------------
