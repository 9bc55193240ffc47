"""Service mode sends one job to every service: per-host job files must then be equal."""

from __future__ import annotations

import pytest

from storbench.core.specs import RunSpec
from storbench.run.attempt import RunError
from storbench.run.service import _check_one_job


def spec() -> RunSpec:
    return RunSpec.from_dict({
        "experiment": "files", "run_id": "write_nj4", "tool": "elbencho", "params": {},
        "target": {"name": "scratch", "type": "directory", "path": "/mnt/x"},
        "hosts": [{"name": "c1"}, {"name": "c2"}, {"name": "c3"}], "timeout_s": 60,
    })  # fmt: skip


def test_equal_job_files_pass_and_different_ones_name_the_hosts(tmp_path):
    texts = {host: f"threads={threads}\n" for host, threads in (("c1", 4), ("c2", 4), ("c3", 8))}
    hosts = [{"name": "c1"}, {"name": "c2"}]
    _check_one_job(spec(), hosts, texts)
    with pytest.raises(RunError) as caught:
        _check_one_job(spec(), [*hosts, {"name": "c3"}], texts)
    assert str(caught.value) == (
        "files/write_nj4: elbencho services all run the controller's one job, but the job files "
        "of c3 differ from c1's (host facts with different values); use standalone execution "
        "or equal values"
    )
