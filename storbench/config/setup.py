"""Client set-up steps (``setup:``): idempotent commands run on each host before the runs.

A step is a command per host (an NFS mount with ``nconnect``, a bind mount, the Virtuozzo
guide's replication attribute on the test folder), with an optional ``check`` that says it
is already done (then the command is skipped) and an optional ``undo`` that ``snakemake
cleanup`` runs. ``once: true`` runs it on the first host of the step only (a per-target
command). Commands may use ``{host}`` (the host's name) and expressions over ``host_index``
(the host's position among the step's hosts, from 0), ``hosts`` (how many) and the storage
facts, so a mount can pick a VIP by host index: ``vip{host_index % 4 + 1}:/ /mnt/vast``.
Facts from the host's telemetry (``cores``, ``mem`` ...) are refused: set-up runs before the
preflight and telemetry, which may need its mounts.
Experiments name the steps they need (``setup: [mounts]``); their runs wait for the step's
marker on each of their hosts.
"""

from __future__ import annotations

from dataclasses import dataclass

from storbench.config.values import positive_duration
from storbench.core import hostfacts

HOST_FIELD = "{host}"
SETUP_NAMES = ("host_index", "hosts", *hostfacts.STORAGE_NAMES)
DEFAULT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class SetupStep:
    name: str
    hosts: tuple[dict, ...]  # config host mappings, in config order
    command: str
    check: str | None = None
    undo: str | None = None
    once: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S

    def step_hosts(self) -> tuple[dict, ...]:
        """The hosts the command runs on: all of them, or the first with once: true."""
        return self.hosts[:1] if self.once else self.hosts


def without_host_field(text: str) -> str:
    """The text with {host} taken out, so only host-fact expressions are left to check."""
    return text.replace(HOST_FIELD, "")


def load(raw: dict, host_groups: dict, problems: list[str]) -> dict[str, SetupStep]:
    steps = {}
    for name, spec in (raw.get("setup") or {}).items():
        key = f"setup.{name}"
        groups = [spec["hosts"]] if isinstance(spec["hosts"], str) else list(spec["hosts"])
        unknown = [group for group in groups if group not in host_groups]
        if unknown:
            problems.append(f"{key}.hosts: unknown host group {unknown[0]!r}")
            continue
        for field in ("command", "check", "undo"):
            if field in spec:
                text = without_host_field(spec[field])
                problems += hostfacts.check({field: text}, key)
                telemetry = sorted(hostfacts.used_names(text) - set(SETUP_NAMES))
                if telemetry:
                    problems.append(
                        f"{key}.{field}: {telemetry[0]} comes from the host's telemetry, which "
                        "runs after the set-up (its mounts); use host_index, hosts or storage_*"
                    )
        timeout = positive_duration(
            f"{key}.timeout", spec.get("timeout", DEFAULT_TIMEOUT_S), problems
        )
        hosts: dict[str, dict] = {}
        for group in groups:
            hosts.update((host["name"], host) for host in host_groups[group])
        steps[name] = SetupStep(
            name=name,
            hosts=tuple(hosts.values()),
            command=spec["command"],
            check=spec.get("check"),
            undo=spec.get("undo"),
            once=spec.get("once") is True,
            timeout_s=timeout or DEFAULT_TIMEOUT_S,
        )
    return steps


def check_experiment(
    key: str, names: list[str], experiment_hosts: list[str], steps: dict, problems: list[str]
) -> None:
    """The experiment's steps exist and cover each of its hosts (a once-step: any host)."""
    for name in names:
        step = steps.get(name)
        if step is None:
            problems.append(f"{key}.setup: unknown setup step {name!r} (defined: "
                            f"{', '.join(steps) or 'none'})")  # fmt: skip
            continue
        if step.once:
            continue
        covered = [host["name"] for host in step.hosts]
        missing = [host for host in experiment_hosts if host not in covered]
        if missing:
            problems.append(
                f"{key}.setup: step {name!r} does not run on {', '.join(missing)} "
                f"(its hosts: {', '.join(covered)})"
            )
