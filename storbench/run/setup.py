"""Client set-up steps on the hosts: run (unless their check says done), and undo at cleanup.

Each (step, host) publishes ``results/setup/<step>/<host>.json`` once its command has run
(or its check passed); the runs of the experiments naming the step wait for it. A failure
names the step, the host and the command's output. Imports stay light: the run path.
"""

from __future__ import annotations

from pathlib import Path

from storbench.config.setup import HOST_FIELD
from storbench.core import atomic, hostfacts, paths
from storbench.core.model import Host
from storbench.core.specs import SetupSpec
from storbench.hosts.transport import HostError, open_transport
from storbench.run.attempt import now

OUTPUT_TAIL = 2000  # characters of a failed command's output shown


class SetupError(RuntimeError):
    pass


def command_text(spec: SetupSpec, text: str) -> str:
    """The command for this host: {host} its name, its index and the storage facts computed."""
    named = text.replace(HOST_FIELD, spec.host["name"])
    if not hostfacts.has_expression(named):
        return named
    names = {"host_index": spec.host_index, "hosts": spec.hosts, **(spec.storage or {})}
    try:
        return str(hostfacts.evaluate(named, names))
    except hostfacts.HostFactError as error:
        raise SetupError(f"setup {spec.step} on host {spec.host['name']}: {error}") from None


def run_setup(spec: SetupSpec | dict, output: str) -> dict:
    spec = SetupSpec.from_dict(spec)
    command = command_text(spec, spec.command)
    check = command_text(spec, spec.check) if spec.check else None
    host = spec.host["name"]
    where = f"setup {spec.step} on host {host}"
    try:
        with open_transport(_host(spec)) as transport:
            if check and transport.shell(check, timeout_s=spec.timeout_s)[0] == 0:
                state = "already done (its check passed)"
            else:
                code, out, err = transport.shell(command, timeout_s=spec.timeout_s)
                if code != 0:
                    raise SetupError(f"{where}: `{command}` exited {code}:\n" + _tail(err or out))
                if check:
                    code, out, err = transport.shell(check, timeout_s=spec.timeout_s)
                    if code != 0:
                        raise SetupError(
                            f"{where}: `{command}` ran, but its check `{check}` still exits "
                            f"{code}:\n" + _tail(err or out)
                        )
                state = "done"
    except HostError as error:
        raise SetupError(f"{where}: {error}") from None
    marker = {"step": spec.step, "host": host, "command": command, "state": state, "time": now()}
    atomic.write_json(output, marker)
    return marker


def undo_setups(specs: list[dict]) -> list[str]:
    """`snakemake cleanup`: each step's undo on each of its hosts, markers removed; a host
    that fails is reported and the others are still undone."""
    done, failed = [], []
    for raw in specs:
        spec = SetupSpec.from_dict(raw)
        host = spec.host["name"]
        marker = Path(paths.setup_marker(spec.step, host))
        if not marker.exists():
            continue  # never done by this campaign (or undone already): nothing to undo
        if spec.undo:
            try:
                command = command_text(spec, spec.undo)
                with open_transport(_host(spec)) as transport:
                    code, out, err = transport.shell(command, timeout_s=spec.timeout_s)
                if code != 0:
                    failed.append(f"setup {spec.step} on host {host}: `{command}` exited {code}: "
                                  f"{_tail(err or out)}")  # fmt: skip
                    continue
                done.append(f"setup {spec.step} undone on {host}")
            except (HostError, SetupError) as error:
                failed.append(f"setup {spec.step} on host {host}: {error}")
                continue
        marker.unlink(missing_ok=True)
    if failed:
        raise SetupError("undoing the set-up failed:\n  - " + "\n  - ".join(failed))
    return done


def _host(spec: SetupSpec) -> Host:
    return Host.from_dict(spec.host)


def _tail(text: str) -> str:
    text = (text or "").strip()
    return "    " + (text[-OUTPUT_TAIL:] or "(no output)").replace("\n", "\n    ")
