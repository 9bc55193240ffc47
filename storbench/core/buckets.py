"""An experiment's S3 bucket name: <bucket_prefix>-<experiment>, in S3's bucket-name rules."""

from __future__ import annotations

import re

MAX_BUCKET_NAME = 63
_NOT_IN_BUCKET_NAME = re.compile(r"[^a-z0-9.-]+")


def bucket_name(target: dict, experiment: str) -> str:
    """<bucket_prefix>-<experiment>, folded into S3's bucket-name rules."""
    suffix = _NOT_IN_BUCKET_NAME.sub("-", experiment.lower()).strip("-.") or "run"
    return f"{target['bucket_prefix']}-{suffix}"[:MAX_BUCKET_NAME].rstrip("-.")
