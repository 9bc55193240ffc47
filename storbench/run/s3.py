"""S3 targets: bucket names, creation before the runs and removal at cleanup (boto3).

boto3 is imported only inside the functions that talk to the endpoint.
"""

from __future__ import annotations

import datetime

from storbench.core import atomic, paths
from storbench.core.secrets import Credentials, scrub, target_credentials


class S3Error(RuntimeError):
    pass


def client(target: dict, credentials: Credentials):
    import boto3  # lazy: loads boto3, botocore, importlib.metadata
    from botocore.config import Config  # lazy: loads botocore, importlib.metadata

    return boto3.client(
        "s3",
        endpoint_url=target["endpoint"],
        region_name=target.get("region", "us-east-1"),
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key,
        verify=target.get("verify_tls", True),
        config=Config(
            connect_timeout=10,
            read_timeout=60,
            retries={"max_attempts": 3},
            s3={"addressing_style": "path"},  # MinIO and most on-prem endpoints
        ),
    )


def prepare_bucket(target_name: str, target: dict, bucket: str, marker_path: str) -> dict:
    """Create the bucket unless it exists (ours from an earlier run); then publish the marker."""
    credentials = target_credentials(target_name, target)
    s3 = client(target, credentials)
    with _errors(target_name, f"creating bucket {bucket}", credentials):
        existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        created = bucket not in existing
        if created:
            s3.create_bucket(Bucket=bucket)
        s3.head_bucket(Bucket=bucket)
    marker = {
        "target": target_name,
        "endpoint": target["endpoint"],
        "bucket": bucket,
        "created": created,
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    atomic.write_json(marker_path, marker)
    return marker


def cleanup_buckets(target_name: str, target: dict, buckets: list[str]) -> list[str]:
    """Empty and delete each bucket and those tools made from its name (<bucket>-*, <bucket>N)."""
    credentials = target_credentials(target_name, target)
    s3 = client(target, credentials)
    removed = []
    with _errors(target_name, "removing buckets", credentials):
        existing = [b["Name"] for b in s3.list_buckets().get("Buckets", [])]
        for name in existing:
            if any(name == b or name.startswith(b) for b in buckets):
                _empty(s3, name)
                s3.delete_bucket(Bucket=name)
                removed.append(name)
    return removed


def _empty(s3, bucket: str) -> None:
    paginator = s3.get_paginator("list_object_versions")
    for page in paginator.paginate(Bucket=bucket):
        keys = [
            {"Key": item["Key"], "VersionId": item["VersionId"]}
            for item in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


class _errors:
    """Turn boto errors into S3Error naming the target, with secrets scrubbed."""

    def __init__(self, target_name: str, action: str, credentials: Credentials):
        self.where = f"target {target_name}: {action}"
        self.credentials = credentials

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if error is None or not isinstance(error, Exception):
            return False
        from botocore.exceptions import BotoCoreError, ClientError  # lazy: loads botocore

        if isinstance(error, (BotoCoreError, ClientError)):
            message = scrub(str(error), self.credentials.values())
            raise S3Error(f"{self.where}: {message}") from None
        return False


def marker_path(target_name: str, bucket: str) -> str:
    return paths.bucket_marker(target_name, bucket)
