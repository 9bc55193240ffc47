"""Every results/ and reports/ path built from config values stays in its place."""

from __future__ import annotations

import os

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


@pytest.fixture
def named_campaign(monkeypatch):
    monkeypatch.setenv(paths.CAMPAIGN_ENV, "")  # undone with the test, like the name below
    paths.use_campaign("alpha")
    yield
    paths.use_campaign(None)


def test_a_named_campaign_owns_its_results_reports_and_shared_folders(named_campaign):
    assert paths.manifest("e", "r", 1) == "results/alpha/e/raw/r/it1/run.json"
    assert paths.telemetry("h1") == "results/alpha/telemetry/h1.json"
    assert paths.network_results() == "results/alpha/network/network.parquet"
    assert paths.services_marker("fio") == "results/alpha/services/fio.json"
    assert paths.report_dir("campaign") == "reports/alpha/campaign"
    assert paths.compare_dir("a_vs_b") == "reports/alpha/compare/a_vs_b"
    # the steps Snakemake starts read it from their environment
    assert os.environ[paths.CAMPAIGN_ENV] == "alpha"


def test_a_campaign_name_that_would_leave_results_is_refused(monkeypatch):
    monkeypatch.setenv(paths.CAMPAIGN_ENV, "")
    with pytest.raises(paths.PathComponentError, match="campaign '../x'"):
        paths.use_campaign("../x")
    assert paths.results_dir() == "results"
