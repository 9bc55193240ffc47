"""A step's spec is checked for its values' types, its target and its hosts before the step runs.

A hand-written ``--spec`` (README: steps run by hand) with a host given as a name, a time
limit in words or a target without its path used to reach the step and fail there with a
traceback, or run and fail on the host.
"""

from __future__ import annotations

import pytest

from storbench.core.specs import (
    DatasetSpec,
    HostJobsSpec,
    RecipeSpec,
    RunSpec,
    SpecError,
    StageSpec,
)

TARGET = {"name": "scratch", "type": "directory", "path": "/tmp/scratch"}
RUN = {
    "experiment": "demo",
    "run_id": "randread_bs4k",
    "tool": "fio",
    "target": TARGET,
    "params": {"rw": "randread"},
    "hosts": [{"name": "localhost"}],
    "timeout_s": 60,
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hosts": "localhost"}, 'hosts must be a list of mappings, not "localhost"'),
        ({"hosts": ["localhost"]}, 'hosts[0] must be a mapping, not "localhost"'),
        ({"timeout_s": "ten"}, 'timeout_s must be a number, not "ten"'),
        ({"timeout_s": True}, "timeout_s must be a number, not true"),
        ({"timeout_s": 0}, "timeout_s must be seconds above 0, not 0"),
        ({"step": 3}, "step must be a string or null, not 3"),
        ({"per_host_jobs": "yes"}, 'per_host_jobs must be true or false, not "yes"'),
        ({"params": ["rw=read"]}, 'params must be a mapping, not ["rw=read"]'),
        ({"reprepared": ["h1", 2]}, "reprepared[1] must be a string, not 2"),
        ({"hosts": [{"name": "h1", "port": "22"}]},
         'hosts[0].port must be a whole number, not "22"'),
        ({"hosts": [{"name": "h1", "port": 0}]}, "hosts[0]: host h1: port out of range: 0"),
        ({"hosts": [{"address": "10.0.0.1"}]}, "hosts[0]: host setting 'name' is required"),
        ({"target": "scratch"}, 'target must be a mapping, not "scratch"'),
        ({"target": {"name": "scratch", "path": "/tmp"}}, "target: missing key type"),
        ({"target": {**TARGET, "path": ["/tmp"]}}, 'target.path must be a string, not ["/tmp"]'),
        ({"target": {**TARGET, "type": "nfs"}},
         'target.type must be one of directory, block, s3, not "nfs"'),
        ({"target": {"name": "s3", "type": "s3", "bucket": "b"}},
         "target: a target of type s3 needs endpoint, credentials"),
        ({"target": {"name": "a+b", "type": "block", "members": [TARGET, {"name": "b"}]}},
         "target.members[1]: missing key type"),
    ],
)  # fmt: skip
def test_a_run_spec_value_of_the_wrong_shape_is_named(change, message):
    with pytest.raises(SpecError) as raised:
        RunSpec.from_dict({**RUN, **change})
    assert str(raised.value) == f"run spec: {message}"


def test_a_spec_of_the_right_shape_is_taken_as_it_is():
    spec = RunSpec.from_dict({**RUN, "reprepared": ["h1"], "wait_s": 2.5})
    assert (spec.hosts, spec.reprepared, spec.timeout_s) == (({"name": "localhost"},), ("h1",), 60)
    assert spec.to_dict() == {
        **RUN, "reprepared": ["h1"], "wait_s": 2.5,
        "execution": "standalone", "per_host_jobs": False, "step": None,
    }  # fmt: skip


def test_a_host_job_entry_needs_its_host_and_its_values_of_their_type():
    spec = {"render": {}, "suffix": ".fio"}
    with pytest.raises(SpecError, match=r"^render_hosts spec: hosts\[1\]: missing key host$"):
        HostJobsSpec.from_dict({**spec, "hosts": [{"host": "h1"}, {"role": "read"}]})
    with pytest.raises(SpecError, match=r"^render_hosts spec: hosts\[0\]\.facts must be a str"):
        HostJobsSpec.from_dict({**spec, "hosts": [{"host": "h1", "facts": 1}]})


RECIPE = {
    "kind": "precondition", "name": "afa", "target": {**TARGET, "type": "block"},
    "hosts": [{"name": "localhost"}], "capacity": "1GiB", "slice_bytes": 1 << 20, "job": {},
    "interval_s": 5, "cliff": None, "rounds": None, "flush": None, "timeout_s": None,
    "sha256": "0" * 64, "dir": "prep/afa", "recipe_spec": {},
    "tokens": {"localhost": "/tmp/storbench/afa.token"},
}  # fmt: skip


def test_a_stage_spec_checks_its_recipe_and_takes_a_recipe_without_a_time_limit():
    stage = {"stage": "purge", "kind": "purge", "index": 0, "command": "true"}
    assert StageSpec.from_dict({**stage, "recipe": RECIPE}).recipe.timeout_s is None
    assert StageSpec.from_dict({**stage, "recipe": RecipeSpec.from_dict(RECIPE)}).index == 0
    with pytest.raises(SpecError, match=r"^recipe spec: hosts\[0\]: host setting 'name'"):
        StageSpec.from_dict({**stage, "recipe": {**RECIPE, "hosts": [{}]}})
    with pytest.raises(SpecError, match=r'^stage spec: index must be a whole number, not "0"$'):
        StageSpec.from_dict({**stage, "index": "0", "recipe": RECIPE})


def test_a_dataset_spec_needs_a_token_path_for_each_of_its_hosts():
    """A token path given as a list stopped `prepare dataset` on the host with Python's error."""
    dataset = {
        "kind": "dataset", "name": "files", "target": TARGET, "method": "layout",
        "hosts": [{"name": "h1"}, {"name": "h2"}], "job": {"bs": "1m"}, "sha256": "0" * 64,
        "timeout_s": 60, "raw_dir": "results/targets/scratch/datasets/files",
    }  # fmt: skip
    tokens = {"h1": "/tmp/storbench/t1.json", "h2": "/tmp/storbench/t2.json"}
    assert DatasetSpec.from_dict({**dataset, "tokens": tokens}).tokens == tokens
    with pytest.raises(SpecError, match=r"^dataset spec: tokens: no token path for host\(s\) h2$"):
        DatasetSpec.from_dict({**dataset, "tokens": {"h1": tokens["h1"]}})
    with pytest.raises(
        SpecError, match=r"^dataset spec: tokens.h2 must be a string .*, not \[1\]$"
    ):
        DatasetSpec.from_dict({**dataset, "tokens": {**tokens, "h2": [1]}})
