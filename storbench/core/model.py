"""The typed model a validated config becomes: Campaign, Experiment, Run, Host."""

from __future__ import annotations

import dataclasses
import os
import posixpath
from dataclasses import dataclass, field
from functools import cached_property

from storbench.core import hostfacts
from storbench.core.report_units import DEFAULT_UNITS


@dataclass(frozen=True)
class Experiment:
    name: str
    tool: str
    host_groups: tuple[str, ...]
    target_name: str
    target: dict
    iterations: int
    job: dict
    sweep: dict
    template: str | None
    job_file: str | None
    timeout: float | None
    schedule: str | None = None  # schedule file whose workloads are the runs
    schedule_values: tuple = ()  # every value of the schedule's lines (host facts among them)
    target_set: tuple[str, ...] = ()  # several targets: runs on each alone and on all at once
    together_only: bool = False  # a target set's runs use all its targets at once, never one
    execution: str = "standalone"  # or "service": tool services driven by one controller
    steps: dict | None = None  # {"mode": "incremental" | "constant", "size": n} or "counts"
    rwmixreadhost: int | None = None  # percent of a run's hosts that read
    slow_host_percent: float = 10.0
    max_start_skew_s: float = 1.0
    require_same_version: bool = False  # hosts' tool versions differing fail preflight
    dataset: str | None = None  # a prepared dataset the runs use
    precondition: str | None = None  # a preconditioning recipe run on the target first
    flush_phase: str | None = None  # 'before' or 'after' the recipe's cache flush
    prep_state: str | None = None  # label of the preparation state, e.g. 'afa, after flush'
    search: dict | None = None  # latency-SLO search settings (storbench.config.search.settings)
    faults: tuple = ()  # fault events run during the workload (storbench.run.faults)
    fault_analysis: dict | None = None  # dip and recovery settings (storbench.config.fault_config)
    soak: dict | None = None  # chunks of a soak run (storbench.config.fault_config.soak_plan)
    allow_commands: bool = False  # job options that run commands on the hosts (exec_prerun)
    after: tuple[str, ...] = ()  # experiments whose runs all finish before this one starts
    ordered: bool = False  # the runs go one after another, in the order the sweep writes them
    wait_s: float | None = None  # a pause before each run
    setup: tuple[str, ...] = ()  # client set-up steps done on the hosts before the runs

    @cached_property
    def uses_host_facts(self) -> bool:
        """Whether any job or swept value is computed per host from its telemetry (asked once
        per job while Snakemake plans, so kept)."""

        values = list(self.job.values()) + list(self.schedule_values)
        for option, swept in self.sweep.items():
            lists = swept.values() if option == "zip" else [swept]
            values += [value for values_ in lists for value in values_]
        return any(hostfacts.has_expression(value) for value in values)

    def option_key(self, option: str | None) -> str:
        """The config key that sets a job option (experiments.x.sweep.zip.rw, .sweep.bs,
        .job.phases), so that a problem with it names its line; else the experiment's."""
        key = f"experiments.{self.name}"
        if option is None or option == "zip":
            return key
        if option in (self.sweep.get("zip") or {}):
            return f"{key}.sweep.zip.{option}"
        if option in self.sweep:
            return f"{key}.sweep.{option}"
        return f"{key}.job.{option}" if option in self.job else key


@dataclass(frozen=True)
class Campaign:
    raw: dict
    host_groups: dict  # group name -> list of host spec dicts
    experiments: dict  # name -> Experiment
    datasets: dict = field(default_factory=dict)  # name -> config.preparation.Dataset
    recipes: dict = field(default_factory=dict)  # name -> config.preparation.Recipe
    runs: dict = field(default_factory=dict)  # experiment name -> tuple[Run, ...], in plan order
    storage: dict = field(default_factory=dict)  # the storage_* expression names (storage:)
    setups: dict = field(default_factory=dict)  # name -> config.setup.SetupStep

    def experiment_runs(self, name: str) -> list[Run]:
        """The planned runs; a search experiment has none: its probes are decided as it goes."""
        return list(self.runs[name])

    def hosts_of(self, experiment: str) -> list[dict]:
        hosts: list[dict] = []
        for group in self.experiments[experiment].host_groups:
            hosts.extend(self.host_groups[group])
        return hosts

    @property
    def name(self) -> str | None:
        """The campaign's name (its results/ and reports/ folder), None for the default."""
        return self.raw.get("campaign")

    @property
    def default_experiments(self) -> list[str]:
        return list(self.raw.get("run") or self.experiments)

    @property
    def report_settings(self) -> dict:
        """The campaign report's folder name and title, whether reports get a PDF, and the
        bandwidth unit system of every report."""
        settings = {
            "name": DEFAULT_REPORT_NAME,
            "pdf": True,
            "units": DEFAULT_UNITS,
            **(self.raw.get("report") or {}),
        }
        settings.setdefault("title", f"storbench campaign report: {settings['name']}")
        return settings


DEFAULT_REPORT_NAME = "campaign"


@dataclass(frozen=True)
class Run:
    run_id: str
    params: dict  # job options with this sweep point applied, in config order
    point: dict  # only the swept options
    hosts: tuple[str, ...] = ()  # the hosts this run uses; empty: every host of the experiment
    step: str | None = None  # client step label: 'h4' (incremental), 'host-<name>' (constant)
    targets: tuple[str, ...] = ()  # a target set's members this run uses; empty: the target


TRANSPORTS = ("local", "ssh")
# per-step: paramiko, a new connection per step; persistent: one OpenSSH master per host, kept
CONNECTIONS = ("per-step", "persistent", "tree")
# one login per host for the whole campaign, and no fan-out cap for paramiko's in-process crypto
DEFAULT_CONNECTION = "persistent"


@dataclass(frozen=True)
class Host:
    name: str  # as configured: 'localhost', 'client01', '127.0.0.2'
    transport: str = "local"  # 'local' | 'ssh'
    address: str = ""  # what to connect to; default: name
    user: str | None = None
    port: int = 22
    identity: str | None = None  # private key path, ~ expanded
    jump: str | None = None  # 'user@host:port' (user and port optional)
    gateway: str | None = None  # connection tree: the ClusterShell gateway its sessions go through
    gateway_python: str = "python3"  # the gateway's python, with ClusterShell installed
    connect_timeout: float = 10.0
    host_key_check: bool = True
    connection: str = DEFAULT_CONNECTION  # how an SSH host is reached: one of CONNECTIONS
    known_hosts: str | None = None  # extra known_hosts file, ~ expanded
    workdir: str = "/tmp/storbench"  # scratch dir on the host for job files and tool output
    group: str | None = None  # the config's host group it came from
    keep_attempts: int = 0  # finished attempt folders kept in workdir per iteration (diagnosis)
    unresponsive_s: float = 30.0  # a silent SSH host that does not answer a probe this long
    # {tool: port} of this host's tool services; tools that listen on every address (elbencho,
    # warp client) need a port per host when several hosts share one machine
    service_ports: dict = dataclasses.field(default_factory=dict)
    # the controller's address as this host reaches it (workers that dial the controller)
    controller_address: str | None = None
    # the address the tools' traffic uses (a data network), when it is not the SSH address
    data_address: str | None = None

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"host name must be a non-empty string, got {self.name!r}")
        if self.transport not in TRANSPORTS:
            raise ValueError(
                f"host {self.name}: transport must be one of {', '.join(TRANSPORTS)},"
                f" got {self.transport!r}"
            )
        if self.connection not in CONNECTIONS:
            raise ValueError(
                f"host {self.name}: connection must be one of {', '.join(CONNECTIONS)},"
                f" got {self.connection!r}"
            )
        if isinstance(self.port, bool) or not isinstance(self.port, int):
            raise ValueError(f"host {self.name}: port must be an integer, got {self.port!r}")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"host {self.name}: port out of range: {self.port}")
        if not self.connect_timeout > 0:
            raise ValueError(f"host {self.name}: connect_timeout must be > 0")
        if not posixpath.isabs(self.workdir):
            raise ValueError(f"host {self.name}: workdir must be absolute, got {self.workdir!r}")
        if self.jump is not None:
            parse_jump(self.jump)
        if (self.connection == "tree") != bool(self.gateway):
            raise ValueError(
                f"host {self.name}: connection tree and a gateway go together"
                f" (connection {self.connection!r}, gateway {self.gateway!r})"
            )
        if self.gateway and self.jump:
            raise ValueError(f"host {self.name}: a gateway and a jump host exclude each other")
        if not self.address:
            object.__setattr__(self, "address", self.name)
        for tool, port in self.service_ports.items():
            if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
                raise ValueError(f"host {self.name}: service_ports.{tool}: bad port {port!r}")
        for key in ("identity", "known_hosts"):
            value = getattr(self, key)
            if value is not None:
                object.__setattr__(self, key, os.path.expanduser(value))

    @classmethod
    def from_dict(cls, d: dict) -> Host:
        """Build from a config mapping; None values mean 'default'."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown host setting(s): {', '.join(map(str, unknown))}")
        values = {key: value for key, value in d.items() if value is not None}
        if "name" not in values:
            raise ValueError("host setting 'name' is required")
        return cls(**values)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def tool_address(self) -> str:
        """Where the tools reach this host: its data-path address, else its SSH address."""
        return self.data_address or self.address


def parse_jump(jump: str) -> tuple[str | None, str, int]:
    """'user@host:port' -> (user or None, host, port); IPv6 hosts need brackets."""
    user, _, host_port = jump.rpartition("@")
    host, colon, port = host_port.rpartition(":")
    if not colon or host.endswith(":"):  # no port given (or a bare IPv6 address)
        host, port = host_port, "22"
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"jump host must look like user@host:port, got {jump!r}")
    return user or None, host, int(port)
