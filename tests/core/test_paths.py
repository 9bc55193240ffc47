"""Every results/ and reports/ path built from config values stays in its place."""

from __future__ import annotations

import pytest

from storbench.core import paths

HOSTILE = [
    "..",
    ".",
    "../x",
    "x/../../etc",
    "/etc",
    "a/b",
    "x\n",
    "\nx",
    ".hidden",
    "-rf",
    "a b",
    "",
    "x" * 201,
    "é",
    "a\x00b",
    "${HOME}",
    "$(touch x)",
]


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_hostile_values_never_become_a_path_component(value):
    with pytest.raises(paths.PathComponentError, match="cannot name a file or folder"):
        paths.component(value, "run id")


@pytest.mark.parametrize(
    "builder",
    [
        lambda v: paths.manifest("e", v, 1),
        lambda v: paths.manifest(v, "r", 1),
        lambda v: paths.host_job("e", "r", v, ".fio"),
        lambda v: paths.telemetry(v),
        lambda v: paths.parsed("e", v, 1),
        lambda v: paths.report_dir(v),
        lambda v: paths.stage_marker("t", "r", v),
        lambda v: paths.dataset_marker(v, "d"),
        lambda v: paths.compare_dir(v),
    ],
)
@pytest.mark.parametrize("value", ["..", "../../outside", "x\n", "/abs"], ids=repr)
def test_every_path_builder_refuses_them(builder, value):
    with pytest.raises(paths.PathComponentError):
        builder(value)


def test_ordinary_names_and_wildcards_pass_unchanged():
    assert paths.manifest("demo", "randread_bs4k_qd16_nj1", 2) == (
        "results/demo/raw/randread_bs4k_qd16_nj1/it2/run.json"
    )
    assert paths.host_job("e", "r", "127.0.0.2", ".fio") == "results/e/jobs/r/127.0.0.2.fio"
    assert paths.manifest() == "results/{experiment}/raw/{run_id}/it{iteration}/run.json"
    assert paths.component("client01.lab-2_x") == "client01.lab-2_x"
