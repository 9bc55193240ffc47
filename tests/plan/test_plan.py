"""Sweep expansion and run ids."""

import copy

import pytest

from storbench.config import sweep
from storbench.config.campaign import ConfigError, load_campaign
from storbench.core.options import normalized_options
from storbench.plan import specs as plan
from storbench.run.render import render_job
from tests.config.test_config import VALID


def test_cross_product_in_sweep_order():
    points = sweep.sweep_points({"rw": ["read", "write"], "bs": ["4k", "1m"]})
    assert points == [
        {"rw": "read", "bs": "4k"},
        {"rw": "read", "bs": "1m"},
        {"rw": "write", "bs": "4k"},
        {"rw": "write", "bs": "1m"},
    ]


def test_zip_pairs_elementwise_and_crosses_the_rest():
    points = sweep.sweep_points(
        {"zip": {"bs": ["4k", "1m"], "iodepth": [32, 4]}, "rw": ["read", "write"]}
    )
    assert points == [
        {"bs": "4k", "iodepth": 32, "rw": "read"},
        {"bs": "4k", "iodepth": 32, "rw": "write"},
        {"bs": "1m", "iodepth": 4, "rw": "read"},
        {"bs": "1m", "iodepth": 4, "rw": "write"},
    ]


def test_empty_sweep_is_one_point():
    assert sweep.sweep_points({}) == [{}]


@pytest.mark.parametrize(
    ("params", "point", "expected"),
    [
        ({"rw": "randread", "bs": "4k", "iodepth": 16, "numjobs": 1}, {}, "randread_bs4k_qd16_nj1"),
        ({"rw": "read", "bs": "1MiB", "iodepth": 1}, {}, "read_bs1m_qd1"),
        ({"rw": "randrw", "rwmixread": 70, "bs": 4096}, {}, "randrw_bs4k_mix70"),
        (
            {"rw": "read", "ioengine": "io_uring"},
            {"ioengine": "io_uring"},
            "read_ioengine-io-uring",
        ),
        ({"rw": "read", "filename": "/a b"}, {"filename": "/a b"}, "read_filename--a-b"),
        ({}, {}, "run"),
    ],
)
def test_run_ids_are_readable_and_safe(params, point, expected):
    assert sweep.run_id(params, point) == expected


def test_demo_expands_to_sixteen_distinct_runs():
    raw = copy.deepcopy(VALID)
    raw["experiments"]["demo"]["sweep"]["rw"] = ["read", "write", "randread", "randwrite"]
    runs = load_campaign(raw).experiment_runs("demo")
    ids = [r.run_id for r in runs]
    assert len(ids) == len(set(ids)) == 16
    assert ids[0] == "read_bs4k_qd1_nj1" and ids[-1] == "randwrite_bs1m_qd16_nj1"
    assert runs[0].params["size"] == "256MiB" and runs[0].point == {
        "rw": "read",
        "bs": "4k",
        "iodepth": 1,
    }


def test_colliding_run_ids_are_a_config_error():
    raw = copy.deepcopy(VALID)
    raw["experiments"]["demo"]["sweep"] = {"bs": ["4k", "4096"]}
    with pytest.raises(ConfigError, match="experiments.demo.sweep: .* both get run id 'bs4k_nj1'"):
        load_campaign(raw)


def test_timeout_defaults_from_runtime():
    assert plan.iteration_timeout({"runtime": "5s", "ramp_time": "1s"}, None) == 2 * 6 + 120
    assert plan.iteration_timeout({}, None) == plan.DEFAULT_ITERATION_TIMEOUT_S
    assert plan.iteration_timeout({"runtime": "5s"}, 30.0) == 30.0


def test_normalized_options_are_unambiguous_for_fio():
    options = normalized_options({"size": "256MiB", "bs": "4k", "runtime": 1.5, "direct": True})
    assert options == {"size": "256m", "bs": "4k", "runtime": "1500ms", "direct": 1}


def _vdbench_service(raw: dict, **group) -> dict:
    raw["hosts"]["clients"].update(group)
    raw["targets"]["lun"] = {"type": "block", "path": "/dev/mapper/afa_lun1"}
    raw["experiments"]["afa"] = {
        "tool": "vdbench",
        "hosts": "clients",
        "target": "lun",
        "execution": "service",
        "job": {"rw": "randrw", "bs": "4k", "runtime": "60s"},
    }
    return raw


def test_a_vdbench_master_reaches_its_slaves_at_their_data_address():
    campaign = load_campaign(_vdbench_service(copy.deepcopy(VALID), data_address="10.9.0.{n}"))
    run = campaign.experiment_runs("afa")[0]
    spec = plan.render_spec(campaign, "afa", run)
    assert spec.hosts == ("client01", "client02", "client03", "client04")
    assert spec.addresses == {f"client0{n}": f"10.9.0.{n}" for n in range(1, 5)}
    assert "hd=hd3,system=10.9.0.3" in render_job(spec).splitlines()


def test_hosts_reached_by_name_leave_the_render_spec_as_it_was():
    campaign = load_campaign(_vdbench_service(copy.deepcopy(VALID)))
    spec = plan.render_spec(campaign, "afa", campaign.experiment_runs("afa")[0])
    assert "addresses" not in spec.to_dict() and "users" not in spec.to_dict()
    assert "hd=hd3,system=client03" in render_job(spec).splitlines()


def test_a_vdbench_master_logs_in_as_the_host_groups_user():
    """hd= lines said user=root (hd=default) whatever user the host group logs in with."""
    campaign = load_campaign(_vdbench_service(copy.deepcopy(VALID), user="bench"))
    spec = plan.render_spec(campaign, "afa", campaign.experiment_runs("afa")[0])
    assert spec.users == {f"client0{n}": "bench" for n in range(1, 5)}
    lines = render_job(spec).splitlines()
    assert "hd=hd3,system=client03,user=bench" in lines
    # the config's own hd_user is the user of every host, as before
    raw = _vdbench_service(copy.deepcopy(VALID), user="bench")
    raw["experiments"]["afa"]["job"]["hd_user"] = "vdbench"
    campaign = load_campaign(raw)
    lines = render_job(plan.render_spec(campaign, "afa", campaign.experiment_runs("afa")[0]))
    assert "hd=hd3,system=client03" in lines.splitlines() and ",user=vdbench," in lines
