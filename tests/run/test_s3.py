"""S3 targets: bucket names, credentials, and bucket preparation/cleanup against a real MinIO."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest

from storbench.core.buckets import bucket_name
from storbench.core.secrets import Credentials, SecretError, scrub, target_credentials
from storbench.core.specs import RunSpec
from storbench.run import engine as runner
from storbench.run import s3
from storbench.tools.base import ToolAdapter
from tests.workflow.test_workflow import planned_jobs, snakemake


def s3_target(endpoint="http://127.0.0.1:9000", **credentials) -> dict:
    return {
        "type": "s3",
        "endpoint": endpoint,
        "region": "us-east-1",
        "bucket_prefix": "storbench",
        "credentials": credentials
        or {"access_key_env": "SB_ACCESS", "secret_key_env": "SB_SECRET"},
    }


def boto(minio):
    return boto3.client(
        "s3",
        endpoint_url=minio.endpoint,
        aws_access_key_id=minio.access_key,
        aws_secret_access_key=minio.secret_key,
        region_name="us-east-1",
    )


def bucket_names(minio) -> set[str]:
    return {b["Name"] for b in boto(minio).list_buckets()["Buckets"]}


# --- names and credentials ------------------------------------------------------------------


def test_bucket_names_follow_s3_rules():
    assert bucket_name(s3_target(), "warp_GET.4k") == "storbench-warp-get.4k"
    assert len(bucket_name(s3_target(), "x" * 100)) == 63


def test_credentials_from_environment_name_the_missing_variable():
    target = s3_target()
    keys = target_credentials("minio", target, {"SB_ACCESS": "ak", "SB_SECRET": "sk"})
    assert keys.values() == ("ak", "sk")
    assert "ak" not in repr(keys) and "sk" not in repr(keys)
    with pytest.raises(SecretError, match="target minio: environment variable SB_SECRET is not"):
        target_credentials("minio", target, {"SB_ACCESS": "ak"})


def test_credentials_from_a_file_and_profile(tmp_path):
    path = tmp_path / "credentials"
    path.write_text("[lab]\naws_access_key_id = AK1\naws_secret_access_key = SK1\n[bad]\nx=1\n")
    keys = target_credentials("t", s3_target(file=str(path), profile="lab"))
    assert keys == Credentials("AK1", "SK1")
    with pytest.raises(SecretError, match=r"no profile \[default\]"):
        target_credentials("t", s3_target(file=str(path)))
    with pytest.raises(SecretError, match=r"profile \[bad\] .* lacks aws_access_key_id"):
        target_credentials("t", s3_target(file=str(path), profile="bad"))
    with pytest.raises(SecretError, match="cannot read credentials file"):
        target_credentials("t", s3_target(file=str(tmp_path / "absent")))


def test_scrub_replaces_every_secret():
    assert scrub("key=AK1 secret=SK1 AK1", ["AK1", "SK1"]) == "key=*** secret=*** ***"


# --- a real MinIO ---------------------------------------------------------------------------


@pytest.fixture
def minio_env(minio, monkeypatch):
    monkeypatch.setenv("SB_ACCESS", minio.access_key)
    monkeypatch.setenv("SB_SECRET", minio.secret_key)
    return minio


def test_prepare_creates_the_bucket_once_and_cleanup_removes_tool_buckets(minio_env, tmp_path):
    target = s3_target(minio_env.endpoint)
    marker = tmp_path / "marker.json"
    first = s3.prepare_bucket("minio", target, "storbench-prep", str(marker))
    second = s3.prepare_bucket("minio", target, "storbench-prep", str(marker))
    assert (first["created"], second["created"]) == (True, False)
    assert json.loads(marker.read_text())["bucket"] == "storbench-prep"
    client = boto(minio_env)
    client.create_bucket(Bucket="storbench-prep1")  # as GOSBench names its buckets
    client.put_object(Bucket="storbench-prep1", Key="obj", Body=b"x" * 4096)
    client.put_object(Bucket="storbench-prep", Key="a/b", Body=b"y")
    client.create_bucket(Bucket="other-bucket")
    removed = s3.cleanup_buckets("minio", target, ["storbench-prep"])
    assert sorted(removed) == ["storbench-prep", "storbench-prep1"]
    assert "other-bucket" in bucket_names(minio_env)
    assert not {"storbench-prep", "storbench-prep1"} & bucket_names(minio_env)


def test_wrong_keys_give_an_error_naming_the_target_without_the_key(minio_env, monkeypatch):
    monkeypatch.setenv("SB_SECRET", "not-the-secret-" + minio_env.secret_key[:4])
    with pytest.raises(s3.S3Error) as error:
        s3.prepare_bucket("minio", s3_target(minio_env.endpoint), "storbench-x", "/dev/null")
    assert str(error.value).startswith("target minio: creating bucket storbench-x:")
    assert "not-the-secret-" not in str(error.value)


def warp_campaign(endpoint: str) -> dict:
    return {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"minio": s3_target(endpoint)},
        "experiments": {
            "objects": {
                "tool": "warp",
                "hosts": "localhost",
                "target": "minio",
                "job": {"op": "get", "runtime": "5s", "numjobs": 4},
                "sweep": {"bs": ["4k", "1m"]},
            }
        },
    }


def every_file_text(*roots: Path) -> str:
    texts = []
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file():
                texts.append(path.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(texts)


def test_workflow_prepares_the_bucket_keeps_keys_out_and_cleans_up(minio_env, tmp_path):
    config = warp_campaign(minio_env.endpoint)
    locks = ("--resources", "lock_minio=1")
    dry = snakemake(tmp_path, config, "-n", *locks)
    assert planned_jobs(dry)["prepare_bucket"] == 1
    marker = "results/targets/minio/buckets/storbench-objects.json"
    snakemake(tmp_path, config, marker, *locks)
    assert "storbench-objects" in bucket_names(minio_env)
    # warp is not installed here: preflight fails, naming how to install it
    failed = snakemake(tmp_path, config, *locks, check=False)
    assert failed.returncode != 0
    preflight_log = (tmp_path / "results/objects/logs/preflight.log").read_text()
    assert "host localhost: warp is not installed; install it:" in preflight_log
    snakemake(tmp_path, config, "cleanup", *locks)
    assert "storbench-objects" not in bucket_names(minio_env)
    assert not (tmp_path / marker).exists()
    everything = every_file_text(tmp_path) + failed.stdout + failed.stderr
    assert minio_env.secret_key not in everything
    assert minio_env.access_key not in everything


# --- keys reach the tool only through private files ------------------------------------------


class EnvProbe(ToolAdapter):
    """A stand-in tool (a real shell on the real local transport) that proves what it got."""

    name = "envprobe"
    job_suffix = ".probe"
    secret_env = {"PROBE_ACCESS": "access_key", "PROBE_SECRET": "secret_key"}

    def version_command(self):
        return ["sh", "-c", "echo envprobe 1.0"]

    def output_name(self, host):
        return f"{host}.out"

    def command(self, job_path, output_path, host):
        script = 'printf "%s|%s|" "$PROBE_ACCESS" "$PROBE_SECRET" > "$2"; cat "$1" >> "$2"'
        return ["sh", "-c", script, "probe", job_path, output_path]


def test_keys_reach_the_tool_environment_and_filled_job_but_no_file_we_keep(tmp_path, monkeypatch):
    """The tool prints both keys: its kept output holds *** where each was (so both reached
    it, exactly), and no file of the run holds either."""
    from storbench.tools import base

    monkeypatch.setattr(runner, "get_tool", lambda name: EnvProbe())
    monkeypatch.setenv("SB_ACCESS", "AKPROBE")
    monkeypatch.setenv("SB_SECRET", "SKPROBE")
    job = tmp_path / "job.probe"
    job.write_text(f"key={base.SECRET_PLACEHOLDERS['secret_key']}\n")
    spec = {
        "experiment": "e",
        "run_id": "r",
        "tool": "envprobe",
        "target": {"name": "minio", **s3_target()},
        "params": {},
        "hosts": [{"name": "localhost", "transport": "local", "workdir": str(tmp_path / "w")}],
        "timeout_s": 30,
    }
    manifest_path = tmp_path / "raw/it1/run.json"
    manifest = runner.run_iteration(RunSpec.from_dict(spec), 1, str(job), str(manifest_path))
    output = (manifest_path.parent / "a1" / "localhost.out").read_text()
    assert output == "***|***|key=***\n"
    assert "SKPROBE" not in manifest.to_json()
    assert not list((tmp_path / "w").rglob("*.private")) and not list(
        (tmp_path / "w").rglob("*.env")
    )
    kept = every_file_text(manifest_path.parent)
    assert "SKPROBE" not in kept and "AKPROBE" not in kept
