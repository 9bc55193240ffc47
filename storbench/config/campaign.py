"""Load and validate a campaign config: schema first, then the checks a schema cannot express.

Every problem is reported as ``<key path>: <problem>`` (``experiments.demo.job.bs: not a
size: '4kk'``) before any job starts; nothing is written.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from pathlib import Path

from storbench.config import datapath, fault_config, schedule, search
from storbench.config import preparation as prepare_plan
from storbench.config import runs as config_runs
from storbench.config import setup as setup_config
from storbench.config.compare import compare_problems
from storbench.config.host_groups import (
    check_each_host_once,
    check_hosts_in_several_groups,
    expand_group,
)
from storbench.config.schema_check import schema_findings
from storbench.config.source import ConfigError, key_path, load_yaml, with_lines
from storbench.config.sweep import MAX_RUNS, PlanError
from storbench.config.values import positive_duration
from storbench.core import hostfacts, paths, units
from storbench.core.buckets import bucket_name
from storbench.core.model import DEFAULT_REPORT_NAME, Campaign, Experiment
from storbench.core.options import (
    COUNT_OPTIONS,
    DURATION_OPTIONS,
    PERCENT_SIZE_OPTIONS,
    SIZE_OPTIONS,
)
from storbench.core.schema_names import PIVOT_DIMENSIONS
from storbench.core.secrets import Credentials, SecretError, target_credentials
from storbench.core.suggest import did_you_mean
from storbench.tools import get_tool, known_tools, preparation_tool
from storbench.tools.base import SECRET_PLACEHOLDERS, job_file_text

MAX_RUN_ID_CHARS = 200  # a run id names folders and files; a file name holds 255 bytes
# YAML aliases can nest a few lines into billions of values (a "billion laughs" file)
MAX_CONFIG_VALUES = 100_000


def load_campaign_file(path: str | os.PathLike) -> Campaign:
    raw = load_yaml(path)
    try:
        return load_campaign(raw, source=str(path))
    except ConfigError as error:
        raise with_lines(error, [path]) from None


def load_campaign(raw: dict, source: str = "config") -> Campaign:
    if _count_values(raw, MAX_CONFIG_VALUES) > MAX_CONFIG_VALUES:
        raise ConfigError(
            [
                f"(top level): more than MAX_CONFIG_VALUES = {MAX_CONFIG_VALUES} values once "
                "YAML aliases are expanded; not a campaign config"
            ],
            source,
        )
    problems, broken_experiments = schema_findings(raw)
    if problems:
        raise ConfigError(problems + _other_experiments_problems(raw, broken_experiments), source)
    problems = _control_character_problems(raw) + _name_problems(raw) + _job_file_problems(raw)
    problems += _shared_place_problems(raw) + _credentials_problems(raw)
    host_groups = {
        name: expand_group(name, group, problems) for name, group in raw["hosts"].items()
    }
    check_hosts_in_several_groups(host_groups, problems)

    storage = _storage_names(raw.get("storage"), problems)
    setups = setup_config.load(raw, host_groups, problems)
    datasets, recipes = prepare_plan.load(raw, host_groups, problems, storage)
    experiments = {
        name: _experiment(name, spec, raw, problems, datasets, recipes, host_groups)
        for name, spec in raw["experiments"].items()
    }
    for name, experiment in experiments.items():
        if experiment is not None:
            _warn_short_runs(name, experiment)
            if not problems:  # after the errors: an option refused would be warned about too
                _warn_tool_job(name, experiment)
            _warn_service_behind_jump(name, experiment, raw["hosts"])
            _warn_tool_logins(name, experiment, raw["hosts"])
            _check_shared_bucket(name, experiment, host_groups, problems)
            _check_controller_address(name, experiment, raw["hosts"], problems)
            experiment_hosts = [
                host["name"] for group in experiment.host_groups
                for host in host_groups.get(group, [])
            ]  # fmt: skip
            setup_config.check_experiment(
                f"experiments.{name}", list(experiment.setup), experiment_hosts, setups, problems
            )
            _check_steps(name, experiment, host_groups, problems)
    _check_campaign_services(experiments, host_groups, problems)
    _check_order(experiments, problems)
    if "network" in raw:
        _check_network(raw["network"], host_groups, problems)
    if "data_path" in raw:
        stepped = [
            group
            for spec in raw["experiments"].values()
            if "steps" in spec
            for group in ([spec["hosts"]] if isinstance(spec["hosts"], str) else spec["hosts"])
        ]
        problems += datapath.check(raw["data_path"], host_groups, required_groups=stepped)
    for index, name in enumerate(raw.get("run") or []):
        if name not in raw["experiments"]:
            problems.append(f"run[{index}]: unknown experiment {name!r}")
    problems += compare_problems(raw)
    problems += _report_problems(raw)
    if problems:
        raise ConfigError(problems, source)
    campaign = Campaign(
        raw=raw,
        host_groups=host_groups,
        experiments=experiments,
        datasets=datasets,
        recipes=recipes,
        storage=storage,
        setups=setups,
    )
    planned = {}
    for name in experiments:
        try:
            runs = config_runs.experiment_runs(campaign, name)
        except PlanError as error:
            problems.append(f"experiments.{name}.sweep: {error}")
            continue
        planned[name] = tuple(runs)
        problems += _command_option_problems(name, campaign.experiments[name], runs)
        unsafe = [run for run in runs if not paths.SAFE_COMPONENT.fullmatch(run.run_id)]
        if unsafe and len(unsafe[0].run_id) <= MAX_RUN_ID_CHARS:
            problems.append(
                f"experiments.{name}.sweep: run id {unsafe[0].run_id!r} (from"
                f" {unsafe[0].point}) cannot name a folder: {paths.COMPONENT_RULE}; change the"
                " swept value"
            )
        long_ids = [run.run_id for run in runs if len(run.run_id) > MAX_RUN_ID_CHARS]
        if long_ids:
            problems.append(
                f"experiments.{name}.sweep: run id {long_ids[0][:60]}... has {len(long_ids[0])} "
                f"characters (more than MAX_RUN_ID_CHARS = {MAX_RUN_ID_CHARS}, for file names); "
                "shorten the swept values"
            )
    total = sum(len(runs) for runs in planned.values())
    if total > MAX_RUNS:
        problems.append(
            f"experiments: {total:,} runs, more than a campaign may plan (MAX_RUNS ="
            f" {MAX_RUNS:,}); split the experiments into several campaigns"
        )
    if problems:
        raise ConfigError(problems, source)
    campaign = dataclasses.replace(campaign, runs=planned)
    for name in planned:
        _warn_cached_data(campaign, name)
    return campaign


def _a_host_of(name: str, host_groups: dict) -> str:
    """'; x is a host of group g, ...' when an experiment names a host where a group goes."""
    holding = [
        group for group, hosts in host_groups.items() if any(h["name"] == name for h in hosts)
    ]
    if not holding:
        return ""
    return f"; {name} is a host of {', '.join(holding)}: an experiment names host groups"


def _other_experiments_problems(raw: dict, broken: frozenset[str] | None) -> list[str]:
    """What the experiments the schema passed have wrong beside the broken ones' schema
    problems, so that one `check` names them all; nothing where the schema broke elsewhere."""
    if broken is None or not isinstance(raw.get("experiments"), dict):
        return []
    others = {name: spec for name, spec in raw["experiments"].items() if name not in broken}
    if not others:
        return []
    try:
        load_campaign({**raw, "experiments": others})
    except ConfigError as error:
        # a reference to a broken experiment is not a problem of its own
        mentions = tuple(repr(name) for name in broken)
        return [text for text in error.problems if not any(m in text for m in mentions)]
    return []


def _warn_cached_data(campaign: Campaign, name: str) -> None:
    """The guides size data at 3 x the cluster's memory or more, so caches cannot serve it."""
    memory = campaign.storage.get("storage_mem")
    experiment = campaign.experiments[name]
    if not memory or experiment.target.get("type") not in ("directory", "block"):
        return
    tool = _tool({"tool": experiment.tool}) if experiment.tool in _known_tools() else None
    sizes = []
    for run in campaign.runs[name]:
        per_host = tool.bytes_per_host(run.params) if tool else None
        if per_host:
            hosts = len(run.hosts) or len(campaign.hosts_of(name))
            sizes.append(per_host * hosts)
    if sizes and min(sizes) < 3 * memory:
        print(
            f"storbench: warning: experiments.{name}: {min(sizes) / 1e9:,.1f} GB of data in "
            f"its smallest run, under 3 x the storage memory ({3 * memory / 1e9:,.1f} GB): "
            "the cluster's caches can serve it",
            file=sys.stderr,
        )


RESERVED_REPORT_FOLDERS = frozenset({"compare", "targets", "network"})
# results/<experiment>/ sits beside these folders, and `snakemake <name>` names these rules
RESERVED_EXPERIMENT_NAMES = frozenset(
    {"telemetry", "network", "logs", "targets", "services", "compare", "setup"}
    | {"all", "plan", "cleanup", "results", "reports"}
)
NAMED_SECTIONS = ("hosts", "targets", "datasets", "preconditioning", "experiments")


def _name_problems(raw: dict) -> list[str]:
    """Names that become folder and file names: one safe path component each, not reserved."""
    problems = []
    for section in NAMED_SECTIONS:
        for name in raw.get(section) or {}:
            try:
                paths.component(name, "the name")
            except paths.PathComponentError as error:
                problems.append(f"{section}.{name!r}: {error}")
                continue
            if section == "experiments" and name in RESERVED_EXPERIMENT_NAMES:
                problems.append(
                    f"experiments.{name}: {name!r} is storbench's own (a folder of results/ or a"
                    f" rule); reserved: {', '.join(sorted(RESERVED_EXPERIMENT_NAMES))}"
                )
    for index, comparison in enumerate(raw.get("compare") or []):
        if isinstance(comparison, dict) and "name" in comparison:
            try:
                paths.component(comparison["name"], "the name")
            except paths.PathComponentError as error:
                problems.append(f"compare[{index}].name: {error}")
    return problems


def _report_problems(raw: dict) -> list[str]:
    """The campaign report's folder must not be an experiment's or another report's."""
    name = (raw.get("report") or {}).get("name", DEFAULT_REPORT_NAME)
    if name in raw["experiments"]:
        return [
            f"report.name: {name!r} is also an experiment; both reports would be "
            f"reports/{name}/ (set report.name to another folder name)"
        ]
    if name in RESERVED_REPORT_FOLDERS:
        return [f"report.name: reports/{name}/ is used by storbench; choose another name"]
    return _table_problems(raw)


RESERVED_TABLE_NAMES = ("key_results", "bandwidth", "latency", "prep_state", "per_host", "scaling")


def _table_problems(raw: dict) -> list[str]:
    """report.tables: known experiments, and dimensions the chosen experiments have."""
    problems = []
    for name, spec in ((raw.get("report") or {}).get("tables") or {}).items():
        key = f"report.tables.{name}"
        if name in RESERVED_TABLE_NAMES:
            problems.append(
                f"{key}: tables/{name}.* is a table storbench writes; choose another name"
            )
        listed = [e for e in spec.get("experiments") or [] if e in raw["experiments"]]
        chosen = listed or list(raw["experiments"])
        for index, experiment in enumerate(spec.get("experiments") or []):
            if experiment not in raw["experiments"]:
                problems.append(f"{key}.experiments[{index}]: unknown experiment {experiment!r}")
        known = set(PIVOT_DIMENSIONS)
        for experiment in chosen:
            known |= _experiment_dimensions(raw["experiments"].get(experiment) or {})
        for part in ("rows", "columns"):
            for index, dimension in enumerate(spec.get(part) or []):
                if dimension not in known:
                    problems.append(
                        f"{key}.{part}[{index}]: {dimension!r} is no result column, parameter "
                        f"or label of {', '.join(chosen)}{_did_you_mean(dimension, known)}"
                    )
        for dimension in spec.get("where") or {}:
            if dimension not in known:
                problems.append(
                    f"{key}.where.{dimension}: unknown dimension{_did_you_mean(dimension, known)}"
                )
        if "storage_node" in (spec.get("per") or []) and not (raw.get("storage") or {}).get(
            "nodes"
        ):
            problems.append(f"{key}.per: storage_node needs storage.nodes (the storage cluster)")
    return problems


def _experiment_dimensions(spec: dict) -> set[str]:
    """An experiment's job options, swept parameters and labels."""
    sweep = spec.get("sweep") or {}
    zipped = sweep["zip"] if isinstance(sweep.get("zip"), dict) else {}
    return {*(spec.get("job") or {}), *sweep, *zipped, *(spec.get("labels") or {})} - {"zip"}


# what other tools call a dimension (fio's own long names among them): 'blocksize' is bs
DIMENSION_SYNONYMS = {
    "blocksize": "bs", "block_size": "bs", "block": "bs", "queue_depth": "iodepth",
    "qd": "iodepth", "threads": "numjobs", "jobs": "numjobs", "readwrite": "rw",
    "hosts": "hosts_in_run", "clients": "hosts_in_run", "operation": "op",
}  # fmt: skip


def _did_you_mean(name: str, known) -> str:
    return did_you_mean(name, known, synonyms=DIMENSION_SYNONYMS)


def _count_values(value, limit: int) -> int:
    """Values in a nested structure, aliases counted each time; stops just past limit."""
    count, pending = 0, [value]
    while pending and count <= limit:
        item = pending.pop()
        count += 1
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return count


def _experiment(
    name: str,
    spec: dict,
    raw: dict,
    problems: list[str],
    datasets: dict,
    recipes: dict,
    host_groups: dict,
) -> Experiment | None:

    key = f"experiments.{name}"
    before = len(problems)
    if spec["tool"] not in known_tools():
        problems.append(
            f"{key}.tool: unknown tool {spec['tool']!r} (known: {', '.join(known_tools())})"
        )
    groups = (spec["hosts"],) if isinstance(spec["hosts"], str) else tuple(spec["hosts"])
    for group in groups:
        if group not in raw["hosts"]:
            problems.append(
                f"{key}.hosts: unknown host group {group!r} (defined: {', '.join(raw['hosts'])})"
                + _a_host_of(group, host_groups)
            )
    check_each_host_once(key, groups, host_groups, problems)
    target_names = [spec["target"]] if isinstance(spec["target"], str) else list(spec["target"])
    for target_name in target_names:
        if target_name not in raw["targets"]:
            problems.append(
                f"{key}.target: unknown target {target_name!r} "
                f"(defined: {', '.join(raw['targets'])})"
            )
        elif spec["tool"] in known_tools():
            _check_target_type(key, spec["tool"], raw["targets"][target_name]["type"], problems)
    if len(target_names) > 1:
        _check_target_set(key, spec, target_names, raw, problems)
    job = dict(spec.get("job") or {})
    prepared = "dataset" in spec or "precondition" in spec or "flush" in spec
    # a dataset or recipe refused for its own problems is named there, not called unknown
    if prepared and not _names_a_refused_preparation(spec, raw, datasets, recipes):
        _check_prepared_tool(key, spec, target_names, raw, recipes, problems)
        job = prepare_plan.experiment_job(
            name, spec, job, datasets, recipes, target_names[0], problems
        )
    sweep = dict(spec.get("sweep") or {})
    _check_swept_host_count(key, sweep, problems)
    tool = spec["tool"] if spec["tool"] in known_tools() else None
    for option, value in job.items():
        _check_option_value(_job_key(key, spec, option), option, value, problems, tool=tool)
    for option, values in sweep.items():
        if option == "zip":
            for zipped, zipped_values in values.items():
                for i, value in enumerate(zipped_values):
                    where = f"{key}.sweep.zip.{zipped}[{i}]"
                    _check_option_value(where, zipped, value, problems, tool=tool)
            continue
        for i, value in enumerate(values):
            _check_option_value(f"{key}.sweep.{option}[{i}]", option, value, problems, tool=tool)
    if "template" in spec and "job_file" in spec:
        problems.append(f"{key}: give either template or job_file, not both")
    for option in ("template", "job_file"):
        if option in spec and not Path(spec[option]).is_file():
            problems.append(f"{key}.{option}: no such file {spec[option]!r}")
    if "job_file" in spec and sweep:
        problems.append(f"{key}.sweep: a ready job_file cannot be swept; use a template")
    if "schedule" in spec:
        _check_schedule(key, spec, sweep, problems)
    timeout = None
    if "timeout" in spec:
        timeout = positive_duration(f"{key}.timeout", spec["timeout"], problems)
        _check_timeout(key, spec["timeout"], timeout, job, sweep, problems)
    max_start_skew_s = 1.0
    if "max_start_skew" in spec:
        try:
            max_start_skew_s = units.parse_duration(spec["max_start_skew"])
        except units.UnitError as error:
            problems.append(f"{key}.max_start_skew: {error}")
    _check_execution(key, spec, problems)
    if tool is not None and "job_file" not in spec and len(problems) == before:
        _check_tool_options(key, tool, job, sweep, problems)
    _check_host_split(key, spec, job, sweep, problems)
    _check_host_expressions(key, spec, job, sweep, problems, storage="storage" in raw)
    search_settings = None
    if "search" in spec:
        search_settings = search.settings(key, spec, problems)
        _check_search_expressions(key, spec, job, problems)
        if spec["tool"] in _known_tools():
            for warning in _tool(spec).search_job_warnings(job):
                option, _, why = warning.partition(": ")
                print(f"storbench: warning: {_job_key(key, spec, option)}: {why}", file=sys.stderr)

    host_names = [host["name"] for group in groups for host in host_groups.get(group, [])]
    fault_config.check_faults(key, spec, job, host_names, problems)
    soak = fault_config.soak_plan(key, spec, job, problems)
    iterations = int(spec.get("iterations", 1))
    if soak:
        job = {**job, "runtime": units.job_duration(soak["chunk_s"])}
        iterations = soak["chunks"]
    if (soak or spec.get("faults")) and spec["tool"] in _known_tools():
        if not _tool(spec).capabilities.interval_series:
            problems.append(
                f"{key}.{'soak' if soak else 'faults'}: {spec['tool']} reports no per-interval "
                f"series, which a {'soak' if soak else 'fault'} is judged by (tools with one: "
                f"{_tools_with('interval_series')})"
            )
        job = _tool(spec).with_interval_series(job)
    target = dict(raw["targets"].get(target_names[0]) or {})
    steps = None
    if "size" in spec.get("steps", {}) and "counts" in spec["steps"]:
        problems.append(f"{key}.steps: give size (every size hosts more) or counts, not both")
    if "steps" in spec and "counts" in spec["steps"]:
        steps = {"mode": spec["steps"]["mode"], "counts": [int(n) for n in spec["steps"]["counts"]]}
    elif "steps" in spec:
        steps = {"mode": spec["steps"]["mode"], "size": int(spec["steps"].get("size", 1))}
    return Experiment(
        name=name,
        tool=spec["tool"],
        host_groups=groups,
        target_name=target_names[0],
        target=target,
        target_set=tuple(target_names) if len(target_names) > 1 else (),
        together_only=spec.get("together_only") is True,
        iterations=iterations,
        job=job,
        sweep=sweep,
        template=spec.get("template"),
        job_file=spec.get("job_file"),
        timeout=timeout,
        schedule=spec.get("schedule"),
        schedule_values=_schedule_values(spec.get("schedule")),
        execution=spec.get("execution", "standalone"),
        steps=steps,
        rwmixreadhost=spec.get("rwmixreadhost"),
        slow_host_percent=float(spec.get("slow_host_percent", 10.0)),
        max_start_skew_s=max_start_skew_s,
        require_same_version=spec.get("require_same_version") is True,
        dataset=spec.get("dataset"),
        precondition=spec.get("precondition"),
        flush_phase=prepare_plan.flush_phase(spec, recipes.get(spec.get("precondition"))),
        prep_state=prepare_plan.state_label(spec, recipes.get(spec.get("precondition"))),
        search=search_settings,
        faults=tuple(spec.get("faults") or ()),
        fault_analysis=(
            fault_config.fault_settings(key, spec, job, problems) if spec.get("faults") else None
        ),
        soak=soak,
        allow_commands=spec.get("allow_commands") is True,
        after=tuple(
            [spec["after"]] if isinstance(spec.get("after"), str) else spec.get("after", ())
        ),
        ordered=spec.get("ordered") is True,
        wait_s=positive_duration(f"{key}.wait", spec["wait"], problems) if "wait" in spec else None,
        setup=tuple(
            [spec["setup"]] if isinstance(spec.get("setup"), str) else spec.get("setup", ())
        ),
    )


def _command_option_problems(name: str, experiment: Experiment, runs) -> list[str]:
    """Job options that run commands on the hosts need the experiment's allow_commands."""
    if experiment.allow_commands:
        return []
    tool = get_tool(experiment.tool)
    found: dict[str, str] = {}
    for run in runs:
        for option, command in tool.command_options(run.params).items():
            found.setdefault(option, command)
    where = {option: "job" if option in experiment.job else "sweep" for option in found}
    return [
        f"experiments.{name}.{where[option]}.{option}: runs a command on every host"
        f" ({command!r}); set allow_commands: true on the experiment to run it"
        for option, command in found.items()
    ]


def _tool(spec: dict):
    """The adapter of an experiment's tool (known: unknown tools are reported first)."""
    return get_tool(spec["tool"])


def _known_tools() -> list[str]:
    return known_tools()


def _tools_by_name(name: str):
    return get_tool(name).capabilities


def _tools_with(capability: str) -> str:
    names = [n for n in known_tools() if getattr(get_tool(n).capabilities, capability)]
    return ", ".join(names) or "none"


def _names_a_refused_preparation(spec: dict, raw: dict, datasets: dict, recipes: dict) -> bool:
    """The experiment's dataset or recipe is in the config, but was refused for its problems."""
    dataset, recipe = spec.get("dataset"), spec.get("precondition")
    return (dataset in (raw.get("datasets") or {}) and dataset not in datasets) or (
        recipe in (raw.get("preconditioning") or {}) and recipe not in recipes
    )


def _recipe_covers(spec: dict, target_names: list[str], raw: dict, recipes: dict) -> bool:
    """A block target set whose every member the named recipe writes."""
    recipe = recipes.get(spec.get("precondition"))
    if "dataset" in spec or recipe is None:
        return False
    blocks = all((raw["targets"].get(name) or {}).get("type") == "block" for name in target_names)
    return blocks and set(target_names) <= set(recipe.target_names)


def _check_prepared_tool(
    key: str, spec: dict, target_names: list[str], raw: dict, recipes: dict, problems: list[str]
):
    """Datasets and recipes are laid out on one target; the runs must find them there.

    A recipe preconditions a block device as a whole, so any tool's runs use it; datasets and
    recipes on directories are files named for the tools with prepared_runs. A flush-only
    recipe writes no file, so any tool measures before and after its flush."""
    recipe = recipes.get(spec.get("precondition"))
    flush_only = recipe is not None and not (recipe.passes or recipe.rounds)
    if spec["tool"] in _known_tools() and not _tool(spec).capabilities.prepared_runs:
        target = raw["targets"].get(target_names[0]) or {}
        if "dataset" in spec:
            problems.append(
                f"{key}.dataset: datasets are laid out in files only "
                f"{_tools_with('prepared_runs')} experiments read; write the data with "
                f"{spec['tool']} in an experiment of its own and start this one after it "
                "(after:), which keeps its runs as the cached preparation"
            )
        elif target.get("type") != "block" and not flush_only:
            problems.append(
                f"{key}.precondition: {spec['tool']} runs use a preconditioned block target; "
                f"a directory's region files are read by {_tools_with('prepared_runs')} only"
            )
    if len(target_names) > 1 and not _recipe_covers(spec, target_names, raw, recipes):
        problems.append(
            f"{key}.target: a prepared experiment runs on one target, or on a set of block "
            "targets that its recipe's passes write (passes: target: [...])"
        )
    if "job_file" in spec:
        problems.append(f"{key}.job_file: a prepared experiment renders its job; use a template")


def _check_timeout(
    key: str, written, timeout: float | None, job: dict, sweep: dict, problems: list[str]
) -> None:
    """A time limit within a run's own runtime and ramp stops every run before its end."""
    try:
        longest = sum(
            max(units.parse_duration(v) for v in [job.get(option, 0), *sweep.get(option, [])])
            for option in ("runtime", "ramp_time")
        )
    except (units.UnitError, TypeError):  # a value the option checks name, or one per host
        return
    if timeout is not None and longest and timeout <= longest:
        problems.append(
            f"{key}.timeout: {written} is within the longest run's runtime and ramp_time"
            f" ({longest:g} s): every such run would be stopped before its end"
        )


def _check_execution(key: str, spec: dict, problems: list[str]) -> None:
    if spec.get("execution") != "service" or spec["tool"] not in _known_tools():
        return
    tool = _tool(spec)
    if "service" not in tool.capabilities.execution:
        supported = (
            "has no service mode"
            if not tool.has_services
            else ("service mode is not wired into the runner yet")
        )
        services = [n for n in _known_tools() if "service" in _tools_by_name(n).execution]
        problems.append(
            f"{key}.execution: {spec['tool']} {supported} (service mode: "
            f"{', '.join(services)}); use standalone"
        )
    if "job_file" in spec:
        problems.append(f"{key}.execution: service mode renders per-host job files; use a template")


MAX_OPTION_SECTIONS = 500  # a sweep's distinct values checked by the tool (one section each)


def _check_tool_options(key: str, tool: str, job: dict, sweep: dict, problems: list[str]):
    """The tool's own verdict on the job options (fio --parse-only), naming the key.

    Each section is a planned point: the first point, then each swept value (or zip row) in
    it, so an option is checked beside the others it runs with (warp's swept `op`)."""
    zipped = sweep.get("zip") or {}
    first = {**job, **{o: v[0] for o, v in sweep.items() if o != "zip" and v}}
    first.update({o: v[0] for o, v in zipped.items() if v})
    sections = [first]
    swept: set[str] = set(zipped)
    length = min((len(listed) for listed in zipped.values()), default=0)
    sections += [{**first, **{o: v[i] for o, v in zipped.items()}} for i in range(length)]
    for option, values in sweep.items():
        if option != "zip":
            swept.add(option)
            sections += [{**first, option: value} for value in values]
    for option, why in get_tool(tool).option_problems(sections[:MAX_OPTION_SECTIONS]).items():
        where = "sweep" if option in swept else "job"
        problems.append(f"{key}.{where}.{option}: {why}")


def _check_host_split(key: str, spec: dict, job: dict, sweep: dict, problems: list[str]) -> None:
    """A host-level split turns each host's pattern into its read or write counterpart."""
    if spec.get("rwmixreadhost") is None or spec["tool"] not in _known_tools():
        return
    tool = _tool(spec)
    patterns = [job["rw"]] if "rw" in job else []
    patterns += list(sweep.get("rw", [])) + list((sweep.get("zip") or {}).get("rw", []))
    option_sets = [{**job, "rw": pattern} for pattern in patterns] or [job]
    for options in option_sets:
        if problem := tool.role_problem(options):
            problems.append(f"{key}.rwmixreadhost: {problem}")
    if "job_file" in spec:
        problems.append(f"{key}.rwmixreadhost: a ready job_file cannot be split; use a template")


def _check_storage_names(key: str, job: dict, sweep: dict, problems: list[str]) -> None:
    """storage_* names need the config's storage section (and its cores or memory)."""
    values = [(f"{key}.job.{option}", value) for option, value in job.items()]
    for option, swept in sweep.items():
        lists = swept.items() if option == "zip" else [(option, swept)]
        values += [(f"{key}.sweep.{name}", v) for name, listed in lists for v in listed]
    for where, value in values:
        used = sorted(hostfacts.used_names(value) & set(hostfacts.STORAGE_NAMES))
        if used:
            problems.append(
                f"{where}: {used[0]} needs the storage cluster declared in storage: "
                "(nodes, cores, memory)"
            )


def _storage_names(storage: dict | None, problems: list[str]) -> dict:
    if not storage:
        return {}
    declared = dict(storage)
    if "memory" in declared:
        try:
            declared["memory"] = units.parse_size(declared["memory"])
        except units.UnitError as error:
            problems.append(f"storage.memory: {error}")
            declared.pop("memory")
    return hostfacts.storage_names(declared)


def _check_host_expressions(
    key: str, spec: dict, job: dict, sweep: dict, problems: list[str], *, storage: bool
) -> None:
    if not storage:
        _check_storage_names(key, job, sweep, problems)
    problems += hostfacts.check(job, f"{key}.job")
    for option, values in sweep.items():
        lists = values.items() if option == "zip" else [(option, values)]
        prefix = f"{key}.sweep.zip" if option == "zip" else f"{key}.sweep"
        for name, listed in lists:
            problems += hostfacts.check(
                {f"{name}[{i}]": value for i, value in enumerate(listed)}, prefix
            )


def _check_campaign_services(experiments: dict, host_groups: dict, problems: list[str]) -> None:
    """A tool's service is started once per campaign on each host: every service experiment
    on the host must look for it at the same address and port, whichever group it names."""
    first: dict[tuple[str, str], tuple[tuple, str]] = {}
    for name, experiment in experiments.items():
        if experiment is None or experiment.execution != "service":
            continue
        if experiment.tool not in _known_tools() or get_tool(experiment.tool).service_per_run:
            continue
        for group in experiment.host_groups:
            for host in host_groups.get(group) or []:
                where = (
                    host.get("data_address"),
                    (host.get("service_ports") or {}).get(experiment.tool),
                )
                seen, seen_group = first.setdefault((experiment.tool, host["name"]), (where, group))
                if seen != where:
                    problems.append(
                        f"hosts.{group}: host {host['name']} runs one {experiment.tool} service"
                        f" for the campaign, which hosts.{seen_group} gives another data_address"
                        f" or service port (experiment {name}); give both groups the same"
                    )
                    return


def _check_shared_bucket(name: str, experiment, host_groups: dict, problems: list[str]) -> None:
    """Standalone S3 tools on several hosts would share one bucket's objects and clear it; in
    service mode the tool gives each client its own object names."""
    hosts = sum(len(host_groups.get(group, [])) for group in experiment.host_groups)
    if experiment.target.get("type") == "s3" and hosts > 1 and experiment.execution != "service":
        services = [
            n
            for n in _known_tools()
            if "service" in _tools_by_name(n).execution and "s3" in _tools_by_name(n).target_types
        ]
        problems.append(
            f"experiments.{name}.execution: an S3 experiment on {hosts} hosts runs in service "
            f"mode (execution: service; tools: {', '.join(services)}), where the tool gives "
            "each client its own objects; standalone S3 runs use one host"
        )


def _check_order(experiments: dict, problems: list[str]) -> None:
    """after: names other experiments, and no chain of them comes back to where it started."""
    for name, experiment in experiments.items():
        if experiment is None:
            continue
        for other in experiment.after:
            if other == name:
                problems.append(f"experiments.{name}.after: an experiment cannot wait for itself")
            elif other not in experiments:
                problems.append(
                    f"experiments.{name}.after: unknown experiment {other!r} "
                    f"(defined: {', '.join(experiments)})"
                )
    for name in experiments:
        chain = _after_cycle(name, experiments, [name])
        if chain and chain[0] == min(chain[:-1]):  # each circle reported once
            problems.append(f"experiments.{name}.after: a circle: {' -> '.join(chain)}")


def _after_cycle(name: str, experiments: dict, path: list[str]) -> list[str] | None:
    experiment = experiments.get(path[-1])
    for other in experiment.after if experiment is not None else ():
        if other == name and len(path) > 1:
            return [*path, other]
        if other in experiments and other not in path:
            found = _after_cycle(name, experiments, [*path, other])
            if found:
                return found
    return None


# The reference guides' shortest measured runs: 60 s for file and block, 900 s for S3
MIN_RUNTIME_S = {"directory": 60.0, "block": 60.0, "s3": 900.0}


def _warn_short_runs(name: str, experiment) -> None:
    """A warning, not an error: short runs are fine for trying a config, not for a report."""
    if experiment.search or experiment.soak:
        return
    minimum = MIN_RUNTIME_S.get(experiment.target.get("type", ""))
    values = [experiment.job.get("runtime"), *experiment.sweep.get("runtime", [])]
    seconds = []
    for value in values:
        try:
            seconds.append(units.parse_duration(value))
        except (TypeError, ValueError, units.UnitError):
            continue
    if minimum and seconds and min(seconds) < minimum:
        print(
            f"storbench: warning: experiments.{name}: runs of {min(seconds):g} s; the reference "
            f"guides measure {experiment.target['type']} targets for at least {minimum:g} s "
            "(fine for trying a config, short for a report)",
            file=sys.stderr,
        )


def _warn_tool_job(name: str, experiment) -> None:
    """The tool adapter's warnings on the options a config gives (not on a template's own)."""
    if experiment.job_file or experiment.template or experiment.schedule:
        return
    sweep = experiment.sweep
    if experiment.search:  # its probes climb a queue-depth ladder up to max_iodepth
        sweep = {**sweep, "iodepth": [experiment.search["max_iodepth"]]}
    for option, why in get_tool(experiment.tool).job_warnings(experiment.job, sweep).items():
        searched = experiment.search and option == "iodepth"
        key = (
            f"experiments.{name}.search.max_iodepth" if searched else experiment.option_key(option)
        )
        print(f"storbench: warning: {key}: {why}", file=sys.stderr)


def _warn_service_behind_jump(name: str, experiment, groups: dict) -> None:
    """Only the sessions go through a jump host: a service's own client connects from here."""
    if experiment.execution != "service":
        return
    for group in experiment.host_groups:
        spec = groups.get(group) or {}
        if spec.get("jump") and "data_address" not in spec:
            print(
                f"storbench: warning: experiments.{name}: service mode on hosts.{group}, reached"
                f" through jump host {spec['jump']}: the tool's client connects from this"
                " controller to each host's service port, not through the jump host; where"
                " the controller cannot reach them, give data_address or run standalone",
                file=sys.stderr,
            )


def _warn_tool_logins(name: str, experiment, groups: dict) -> None:
    """A tool that logs in to the hosts itself (vdbench's master) uses this controller's ssh,
    which knows the group's user (the job file says it) but not the rest of its settings."""
    if experiment.tool not in _known_tools():
        return
    tool = get_tool(experiment.tool)
    logs_in = tool.job_names_hosts(experiment.job, experiment.execution)
    if tool.job_login_user is None or not logs_in:
        return
    for group in experiment.host_groups:
        spec = groups.get(group) or {}
        unused = [key for key in ("identity", "known_hosts", "jump") if key in spec]
        if spec.get("port", 22) != 22:
            unused.insert(0, "port")
        if spec.get("transport") == "ssh" and unused:
            print(
                f"storbench: warning: experiments.{name}: {tool.name} logs in to the hosts of"
                f" hosts.{group} itself, with this controller's ssh and the group's user but"
                f" not its {', '.join(unused)}; set those for these hosts in ~/.ssh/config",
                file=sys.stderr,
            )


def _check_controller_address(name: str, experiment, groups: dict, problems: list[str]) -> None:
    """Workers that dial the controller need its address as the hosts reach it."""
    if experiment.execution != "service" or experiment.tool not in _known_tools():
        return
    if not get_tool(experiment.tool).workers_dial_controller:
        return
    for group in experiment.host_groups:
        spec = groups.get(group) or {}
        if spec.get("transport") == "ssh" and "controller_address" not in spec:
            problems.append(
                f"hosts.{group}.controller_address: {experiment.tool} workers on these hosts "
                f"dial the controller (experiment {name}); give the controller's address as "
                "these hosts reach it"
            )


def _check_target_set(key: str, spec: dict, names: list[str], raw: dict, problems: list[str]):
    """One job file drives every target of a set: same kind, and a tool whose adapter has
    target sets (capabilities.target_sets)."""
    types = {raw["targets"][n]["type"] for n in names if n in raw["targets"]}
    if len(types) > 1 or types & {"s3"}:
        problems.append(
            f"{key}.target: a target set needs targets of one kind, directory or block "
            f"(got {', '.join(sorted(types))})"
        )
    if spec["tool"] in _known_tools() and not _tool(spec).capabilities.target_sets:
        problems.append(
            f"{key}.target: target sets are run with {_tools_with('target_sets')} "
            "(one job section each)"
        )
    if "job_file" in spec:
        problems.append(f"{key}.target: a target set renders its job files; use a template")


def _schedule_values(path: str | None) -> tuple:
    """The values of a (checked) schedule file's lines; () without one."""
    if not path:
        return ()
    try:
        runs = schedule.schedule_runs(path)
    except schedule.ScheduleError:
        return ()  # _check_schedule reports it
    return tuple(value for _, params in runs for value in params.values())


SEARCH_NAMES = frozenset({"hosts", *hostfacts.STORAGE_NAMES})


def _job_key(key: str, spec: dict, option: str) -> str:
    """Where a job option of an experiment is set: its own job, else its dataset's."""
    if option in (spec.get("job") or {}) or "dataset" not in spec:
        return f"{key}.job.{option}"
    return f"datasets.{spec['dataset']}.job.{option}"


def _check_search_expressions(key: str, spec: dict, job: dict, problems: list[str]) -> None:
    """A search sends one job to every host and splits its rate evenly over their jobs."""
    for option, value in job.items():
        per_host = sorted(hostfacts.used_names(value) - SEARCH_NAMES)
        if per_host:
            where = (
                f"{key}.job.{option}"
                if option in (spec.get("job") or {})
                else (f"datasets.{spec.get('dataset')}.job.{option}")
            )
            problems.append(
                f"{where}: a latency-SLO search runs one job on every host and splits its rate "
                f"evenly over their jobs: {per_host[0]} differs per host; use a number, "
                "{hosts} or storage facts ({storage_cores // 2 // hosts})"
            )


def _check_schedule(key: str, spec: dict, sweep: dict, problems: list[str]) -> None:

    if sweep or "job_file" in spec:
        problems.append(f"{key}.schedule: the schedule's lines are the runs; drop sweep/job_file")
    if spec["tool"] not in _known_tools():
        return
    if not _tool(spec).capabilities.schedules:
        problems.append(
            f"{key}.schedule: schedule lines are job options of a tool that reads schedules "
            f"({_tools_with('schedules')}), not {spec['tool']}"
        )
    try:
        entries = schedule.parse_schedule(Path(spec["schedule"]).read_text(), spec["schedule"])
    except OSError as error:
        problems.append(f"{key}.schedule: cannot read {spec['schedule']!r}: {error.strerror}")
        return
    except schedule.ScheduleError as error:
        problems.append(f"{key}.schedule: {error}")
        return
    for entry in entries:
        for option, value in entry.params.items():
            where = f"{key}.schedule[{spec['schedule']}:{entry.line}].{option}"
            _check_option_value(where, option, value, problems, tool=spec["tool"])


def _check_network(network: dict, host_groups: dict, problems: list[str]) -> None:
    hosts = {host["name"] for group in host_groups.values() for host in group}
    if ("server" in network) != ("clients" in network):
        problems.append("network: server and clients go together (one server check)")
    if "server" not in network and "mesh" not in network:
        problems.append("network: give server and clients, or mesh (or both)")
    for index, group in enumerate(network.get("mesh", [])):
        if group not in host_groups:
            problems.append(f"network.mesh[{index}]: unknown host group {group!r}")
    mesh_hosts = {h["name"] for g in network.get("mesh", []) for h in host_groups.get(g, [])}
    if "mesh" in network and len(mesh_hosts) == 1:  # none: its groups were refused, named
        problems.append("network.mesh: a mesh needs at least 2 hosts")
    parallel = network.get("parallel")
    for group in parallel if isinstance(parallel, dict) else ():
        if group not in host_groups:
            problems.append(f"network.parallel.{group}: unknown host group")
    if "duration" in network:
        try:
            seconds = units.parse_duration(network["duration"])
        except units.UnitError as error:
            problems.append(f"network.duration: {error}")
        else:
            if seconds < 1 or seconds != int(seconds):
                problems.append("network.duration: iperf3 runs whole seconds, at least 1s")
    if "server" not in network or "clients" not in network:
        return  # a mesh only
    if network["server"] not in hosts:
        problems.append(f"network.server: unknown host {network['server']!r}")
    for index, group in enumerate(network["clients"]):
        if group not in host_groups:
            problems.append(f"network.clients[{index}]: unknown host group {group!r}")
        elif any(host["name"] == network["server"] for host in host_groups[group]):
            problems.append(
                f"network.clients[{index}]: group {group!r} contains the server "
                f"{network['server']!r}; a host cannot test against itself"
            )


def _check_steps(name: str, experiment, host_groups: dict, problems: list[str]) -> None:
    if experiment.steps is None:
        return
    hosts = sum(len(host_groups.get(group, [])) for group in experiment.host_groups)
    if hosts == 0:
        return  # every group was refused, each named with its own problem
    if "counts" in experiment.steps:
        _check_step_counts(f"experiments.{name}.steps", experiment.steps, hosts, problems)
        return
    size = experiment.steps["size"]
    if size > hosts:
        problems.append(
            f"experiments.{name}.steps.size: {size} is more than the "
            f"{hosts} host(s) of the experiment"
        )
    elif experiment.steps["mode"] == "constant" and hosts % size:
        print(
            f"storbench: warning: experiments.{name}.steps: {hosts} hosts in groups of {size}:"
            f" the last group has {hosts % size}, so its bandwidth is not comparable with the"
            " others'",
            file=sys.stderr,
        )


# what a sweep of the number of client hosts is called in other harnesses' files
HOST_COUNT_NAMES = frozenset(
    {"clients", "hosts", "nodes", "num_clients", "num_hosts", "client_count", "host_count"}
)


def _check_swept_host_count(key: str, sweep: dict, problems: list[str]) -> None:
    """A swept number of hosts is client stepping, written under steps:."""
    for option in HOST_COUNT_NAMES & set(sweep):
        values = sweep[option]
        counts = values if all(isinstance(n, int) and n > 0 for n in values) else [1, 2, 4]
        listed = ", ".join(str(n) for n in counts)
        problems.append(
            f"{key}.sweep.{option}: the hosts of a run are not a tool option: step them with"
            f" steps: {{mode: incremental, counts: [{listed}]}} (the runs on the first {listed}"
            " hosts of the experiment's groups)"
        )


def _check_step_counts(key: str, steps: dict, hosts: int, problems: list[str]) -> None:
    """Counts of an incremental stepping: each a number of the experiment's hosts, rising."""
    counts = steps["counts"]
    if steps["mode"] != "incremental":
        problems.append(f"{key}.counts: host counts step incrementally (mode: incremental)")
    for index, count in enumerate(counts):
        if count > hosts:
            problems.append(
                f"{key}.counts[{index}]: {count} is more than the {hosts} host(s) of the experiment"
            )
            return
        if index and count <= counts[index - 1]:
            problems.append(
                f"{key}.counts[{index}]: {count} after {counts[index - 1]}: the counts rise"
                " (the runs go from the fewest hosts to the most)"
            )
            return


def _check_target_type(key: str, tool: str, target_type: str, problems: list[str]) -> None:

    supported = get_tool(tool).capabilities.target_types
    if target_type not in supported:
        problems.append(
            f"{key}.target: {tool} cannot benchmark a {target_type} target "
            f"(it supports: {', '.join(supported)})"
        )


def _check_option_value(
    key: str, option: str, value, problems: list[str], *, tool: str | None = None
) -> None:
    """Units of sizes and durations, and whether the value reaches the tool's job file intact."""

    text = str(value)
    if _has_control_characters(text):
        problems.append(f"{key}: {CONTROL_CHARACTERS_PROBLEM}")
        return
    if tool and (problem := get_tool(tool).job_value_problem(option, job_file_text(value))):
        problems.append(f"{key}: {problem}")
        return
    if hostfacts.has_expression(value):
        return  # checked by hostfacts.check, resolved per host at render time
    try:
        if option in SIZE_OPTIONS:
            _check_size(option, text)
        elif option in DURATION_OPTIONS:
            units.parse_duration(value)
        elif option in COUNT_OPTIONS:
            _check_count(option, value)
    except units.UnitError as error:
        problems.append(f"{key}: {error}")


def _check_count(option: str, value) -> None:
    """Queue depths and job counts: whole numbers of at least 1 (0 and -1 run nothing, or
    everything at once)."""
    whole = isinstance(value, int | str) and not isinstance(value, bool) and str(value).isdigit()
    if not whole or int(value) < 1:
        raise units.UnitError(f"{option} must be a whole number >= 1, not {value!r}")


def _check_size(option: str, text: str) -> None:
    if option in PERCENT_SIZE_OPTIONS and text.endswith("%"):
        return
    if option in ("bs", "blocksize"):  # fio accepts ranges (4k-16k) and per-direction lists (4k,8k)
        if not text.replace(",", "").strip():
            raise units.UnitError(f"not a block size or range: {text!r}")
        for direction in filter(None, text.split(",")):  # ',8k': reads keep fio's default
            ends = direction.split("-")
            if len(ends) > 2 or not all(ends):
                raise units.UnitError(f"not a block size or range: {text!r}")
            if any(units.parse_size(end) == 0 for end in ends):
                raise units.UnitError(f"a block size must be more than 0: {text!r}")
        return
    units.parse_size(text)


# --- text that ends up in job files and on command lines ---------------------------------

CONTROL_CHARACTERS_PROBLEM = "control characters (newline, tab ...) are not allowed in values"


def _has_control_characters(text: str) -> bool:
    return any(ord(ch) < 32 or ord(ch) == 127 for ch in text)


def _control_character_problems(raw: dict) -> list[str]:
    """Every string but free text: a newline in a path or name would inject job-file lines."""
    return [
        f"{key_path(path)}: {CONTROL_CHARACTERS_PROBLEM}"
        for path, text in _strings(raw, ())
        if _has_control_characters(text) and not _is_free_text(path)
    ]


def _strings(value, path: tuple):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))
    elif isinstance(value, str):
        yield path, value


def _is_free_text(path: tuple) -> bool:
    """Descriptions and the user's own shell commands; experiments' options are checked apart."""
    if path[-1] == "description":
        return True
    if path[0] == "experiments" and len(path) > 2 and path[2] in ("job", "sweep"):
        return True  # _check_option_value reports them with the option's own key
    if path[0] == "experiments" and len(path) > 4 and path[2] == "faults":
        return path[-1] == "command"  # a fault's own shell script (faults[i] or its recover)
    return path[0] == "preconditioning" and (
        path[2:] == ("purge",) or path[2:] == ("flush", "command")
    )


def _credentials_problems(raw: dict) -> list[str]:
    """An S3 target's credentials file read now, as the runs will read it here (missing, not
    INI, no such profile; warned about when others can read it); unset variables warned about."""
    problems = []
    keys = {}
    for name, target in raw["targets"].items():
        spec = target.get("credentials") if target.get("type") == "s3" else None
        if not isinstance(spec, dict):
            continue
        try:
            keys[name] = target_credentials(name, target)
        except SecretError as error:
            text = str(error).removeprefix(f"target {name}: ")
            if "file" in spec:
                problems.append(f"targets.{name}.credentials.file: {text}")
            else:
                print(f"storbench: warning: targets.{name}.credentials: {text}", file=sys.stderr)
    return problems + _job_file_key_problems(raw, keys)


def _job_file_key_problems(raw: dict, keys: dict[str, Credentials]) -> list[str]:
    """A ready job file or own template holding its target's key: results/ and the reports
    keep every job file as it is, so the key would be kept there too (it is not shown here)."""
    problems = []
    for name, spec in raw["experiments"].items():
        targets = spec.get("target")
        names = [targets] if isinstance(targets, str) else targets or []
        held = [(target, keys[target]) for target in names if target in keys]
        if not held or spec.get("tool") not in _known_tools():
            continue  # an unknown tool is told as such
        for option in ("job_file", "template"):
            if isinstance(spec.get(option), str):
                problems += _key_lines_problems(f"experiments.{name}.{option}", spec, option, held)
    return problems


def _key_lines_problems(key: str, spec: dict, option: str, held: list) -> list[str]:
    try:
        lines = Path(spec[option]).read_text(errors="replace").splitlines()
    except OSError:
        return []  # told as a missing file
    problems = []
    for target, credentials in held:
        patterns = [
            re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])")
            for value in credentials.values()
        ]
        numbers = [
            str(n) for n, line in enumerate(lines, 1) if any(p.search(line) for p in patterns)
        ]
        if not numbers:
            continue
        instead = (
            f"{spec['tool']} gets them from its environment: leave them out"
            if _tool(spec).secret_env
            else f"write '{SECRET_PLACEHOLDERS['access_key']}' and"
            f" '{SECRET_PLACEHOLDERS['secret_key']}' in their place"
        )
        problems.append(
            f"{key}: {spec[option]} holds a key of target {target} on"
            f" line{'s' * (len(numbers) > 1)} {', '.join(numbers)} (not shown); job files are"
            f" kept in results/ and the reports, and storbench gives the tool the keys itself"
            f" ({instead})"
        )
    return problems


def _shared_place_problems(raw: dict) -> list[str]:
    """Two targets naming one directory or device, or two experiments' one bucket: a
    target's lock keeps its own runs apart, and a bucket's clean-up is its experiment's."""
    problems = []
    places: dict[tuple, str] = {}
    for name, target in raw["targets"].items():
        if target.get("type") in ("directory", "block") and isinstance(target.get("path"), str):
            place = (target["type"], os.path.normpath(target["path"]))
            if (first := places.setdefault(place, name)) != name:
                problems.append(
                    f"targets.{name}.path: the same {place[0]} as targets.{first}"
                    f" ({place[1]}); one target per place, or their runs could overlap"
                )
            elif other := _directory_around(place, places):
                where = (
                    "inside" if other[1] == os.path.commonpath([place[1], other[1]]) else "around"
                )
                problems.append(
                    f"targets.{name}.path: {place[1]} is {where} targets.{places[other]}"
                    f" ({other[1]}); each target holds its own lock, so their runs could"
                    " overlap: one target, or two folders side by side"
                )
    buckets: dict[tuple, str] = {}
    for name, spec in raw["experiments"].items():
        target = (
            raw["targets"].get(spec.get("target")) if isinstance(spec.get("target"), str) else None
        )
        if not isinstance(target, dict) or target.get("type") != "s3":
            continue
        bucket = (target.get("endpoint"), bucket_name(target, name))
        if (first := buckets.setdefault(bucket, name)) != name:
            problems.append(
                f"experiments.{name}: its bucket {bucket[1]} is experiment {first}'s too (names"
                " fold to lowercase letters, digits, '.' and '-', 63 at most); rename one"
            )
    return problems


def _directory_around(place: tuple, places: dict) -> tuple | None:
    """A directory target holding this one, or held by it."""
    kind, path = place
    if kind != "directory":
        return None
    for other in places:
        if os.path.isabs(path) != os.path.isabs(other[1]):
            continue  # a relative path is the host's own, not comparable
        holding = os.path.commonpath([path, other[1]])
        if other[0] == kind and other != place and holding in (path, other[1]):
            return other
    return None


def _job_file_problems(raw: dict) -> list[str]:
    """Target paths as each tool using them reads them, and the job options of datasets and
    preconditioning recipes as the preparation tool reads them."""

    problems = []
    for name, tools in _target_tools(raw).items():
        path = raw["targets"][name].get("path")  # directory and block targets
        if path is None:
            continue
        for tool in tools:
            if problem := get_tool(tool).target_path_problem(path):
                problems.append(f"targets.{name}.path: {problem}")
    preparer = preparation_tool()
    for key, option, value in _prepared_values(raw):
        found = len(problems)
        # job-file syntax, then sizes, durations and counts, as for experiments' options
        _check_option_value(key, option, value, problems, tool=preparer.name)
        if len(problems) > found:
            continue
        if commands := preparer.command_options({option: value}):
            problems.append(
                f"{key}: runs a command on every host ({next(iter(commands.values()))!r});"
                " not in datasets or preconditioning (use purge: or flush: commands)"
            )
    for key, job, sweep in _prepared_jobs(raw):
        if not any(problem.startswith(f"{key}.") for problem in problems):
            _check_tool_options(key, preparer.name, job or {}, sweep or {}, problems)
    return problems


def _target_tools(raw: dict) -> dict[str, list[str]]:
    """Each target's name -> the tools that write its path into job files (datasets and
    preconditioning recipes are the preparation tool's jobs)."""

    uses: dict[str, set] = {}
    for spec in raw["experiments"].values():
        if spec.get("tool") in known_tools():
            target = spec["target"]
            for name in [target] if isinstance(target, str) else target:
                uses.setdefault(name, set()).add(spec["tool"])
    for section in ("datasets", "preconditioning"):
        for spec in (raw.get(section) or {}).values():
            uses.setdefault(spec["target"], set()).add(preparation_tool().name)
    return {name: sorted(uses[name]) for name in sorted(uses) if name in raw["targets"]}


def _prepared_jobs(raw: dict):
    """(key path, job, sweep) of every job of datasets and preconditioning recipes."""
    for name, spec in (raw.get("datasets") or {}).items():
        yield f"datasets.{name}", spec.get("job"), None
    for name, recipe in (raw.get("preconditioning") or {}).items():
        yield f"preconditioning.{name}", recipe.get("job"), None
        if rounds := recipe.get("rounds"):
            yield f"preconditioning.{name}.rounds", rounds.get("job"), rounds.get("sweep")


def _prepared_values(raw: dict):
    """(key path, option, value) of every job option in datasets and preconditioning recipes."""
    jobs = [(f"datasets.{n}.job", s.get("job")) for n, s in (raw.get("datasets") or {}).items()]
    for name, recipe in (raw.get("preconditioning") or {}).items():
        rounds = recipe.get("rounds") or {}
        jobs += [(f"preconditioning.{name}.job", recipe.get("job"))]
        jobs += [(f"preconditioning.{name}.rounds.job", rounds.get("job"))]
        for option, values in (rounds.get("sweep") or {}).items():
            for index, value in enumerate(values):
                yield f"preconditioning.{name}.rounds.sweep.{option}[{index}]", option, value
    for prefix, job in jobs:
        for option, value in (job or {}).items():
            yield f"{prefix}.{option}", option, value
