"""Snakemake's record of each finished job, kept light in the controller's process.

Snakemake records every finished job's params (`rerun-triggers: params`). Where pandas is
installed, it imports pandas to ask whether each param is a DataFrame, in its scheduler, when
the first job ends: 0.4 s of CPU during which no next job starts (a campaign's first run
waited for it). A process that never imported pandas holds no pandas object, so until it
does, the record is the one Snakemake writes for any other value.
"""

from __future__ import annotations

import functools
import sys


def keep_pandas_out_of_job_records(persistence_class) -> bool:
    """Make persistence_class (Snakemake's PersistenceBase) record params without importing
    pandas while this process has not imported it. False: this Snakemake records them some
    other way, and is left as it is."""
    with_pandas = getattr(persistence_class, "_serialize_param_pandas", None)
    if with_pandas is None or not hasattr(persistence_class, "_serialize_param_builtin"):
        return False
    if getattr(with_pandas, "keeps_pandas_out", False):
        return True

    @functools.wraps(with_pandas)
    def serialize(self, value):
        if "pandas" not in sys.modules:
            return self._serialize_param_builtin(value)
        return with_pandas(self, value)

    serialize.keeps_pandas_out = True  # type: ignore[attr-defined]
    persistence_class._serialize_param_pandas = serialize
    return True
