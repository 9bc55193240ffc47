"""A host lost mid-run in service mode is named first, not only the controller's output tail
(which names the hosts that finished)."""

from __future__ import annotations

import shutil
from pathlib import Path

from storbench.core.specs import RunSpec
from storbench.run.service import client_failure, stuck_lines
from storbench.tools.fio import FioAdapter

LOST = Path(__file__).parents[1] / "fixtures" / "fio" / "service-host-lost.controller.json"


def test_fio_names_the_client_it_lost():
    assert FioAdapter().lost_hosts(LOST.read_text()) == ["127.0.0.201"]
    assert FioAdapter().lost_hosts('{"fio version" : "fio-3.33"}') == []


def test_a_lost_host_heads_the_service_runs_failure(tmp_path):
    shutil.copy(LOST, tmp_path / "controller.json")
    spec = RunSpec.from_dict({
        "experiment": "e1", "run_id": "write_bs64k_nj1", "tool": "fio",
        "target": {"name": "t", "type": "directory", "path": "/tmp/t"}, "params": {},
        "timeout_s": 60, "hosts": [{"name": "127.0.0.201", "transport": "ssh"}],
        "execution": "service",
    })  # fmt: skip
    message = client_failure(spec, FioAdapter(), 1, tmp_path, "controller.json")
    head, _, tail = message.partition(" tail:")
    assert head == (
        "e1/write_bs64k_nj1: fio client exited 1; host 127.0.0.201: lost mid-run (its service"
        " or the host went away); controller.json"
    )
    # the tail of the output names only the two hosts that finished
    assert '"hostname" : "127.0.0.200"' in tail and "127.0.0.201" not in tail


def test_a_stuck_host_is_named_when_the_client_fails_too(tmp_path):
    """The stuck watch stopped a host's service and the client then exited non-zero (or its
    output was cut short): the failure names that host and the processes stopped there."""
    shutil.copy(LOST, tmp_path / "controller.json")
    hosts = [
        {"name": "127.0.0.200", "transport": "ssh"},
        {"name": "127.0.0.201", "transport": "ssh"},
    ]
    spec = RunSpec.from_dict({
        "experiment": "e1", "run_id": "write_bs64k_nj1", "tool": "fio",
        "target": {"name": "t", "type": "directory", "path": "/tmp/t"}, "params": {},
        "timeout_s": 60, "hosts": hosts, "execution": "service",
    })  # fmt: skip
    stuck = {"127.0.0.200": ("4211", "4213")}
    message = client_failure(spec, FioAdapter(), 1, tmp_path, "controller.json", stuck)
    head, _, _ = message.partition(" tail:")
    assert head == (
        "e1/write_bs64k_nj1: fio client exited 1; host 127.0.0.201: lost mid-run (its service"
        " or the host went away); host 127.0.0.200: its service waited for ever for its job;"
        " stopped its processes: 4211 4213; controller.json"
    )
    assert stuck_lines(hosts, {"127.0.0.201": ()}) == []
