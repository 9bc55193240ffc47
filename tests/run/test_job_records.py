"""Snakemake's record of a finished job's params, without importing pandas."""

import json
import subprocess
import sys
import textwrap

from storbench.run.job_records import keep_pandas_out_of_job_records

# A fresh interpreter: this one may have imported pandas already.
RECORDS = textwrap.dedent("""
    import json, sys
    from snakemake.persistence import PersistenceBase
    from storbench.run.job_records import keep_pandas_out_of_job_records

    original = PersistenceBase._serialize_param_pandas
    applied = [keep_pandas_out_of_job_records(PersistenceBase) for _ in range(2)]
    class Recorder(PersistenceBase):  # the params methods use none of its storage
        pass

    Recorder.__abstractmethods__ = frozenset()
    persistence = object.__new__(Recorder)
    spec = '{"run_id": "r1", "iodepth": 16}'
    before = {
        "spec": persistence._serialize_param_pandas(spec),
        "number": persistence._serialize_param_pandas(16),
        "pandas_imported": "pandas" in sys.modules,
    }
    import pandas as pd
    frame = pd.DataFrame({"iops": [1000, 2000]})
    after = {
        "frame": persistence._serialize_param_pandas(frame),
        "frame_by_snakemake": original(persistence, frame),
        "spec": persistence._serialize_param_pandas(spec),
    }
    wrapped_once = PersistenceBase._serialize_param_pandas.__wrapped__ is original
    print(json.dumps({"applied": applied, "before": before, "after": after,
                      "wrapped_once": wrapped_once}))
""")


def test_params_are_recorded_as_snakemake_records_them_without_importing_pandas():
    done = subprocess.run([sys.executable, "-c", RECORDS], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["applied"] == [True, True] and result["wrapped_once"]
    spec_repr = repr('{"run_id": "r1", "iodepth": 16}')
    assert result["before"] == {"spec": spec_repr, "number": "16", "pandas_imported": False}
    # once pandas is in the process, a DataFrame param is hashed as Snakemake hashes it
    after = result["after"]
    assert after["frame"] == after["frame_by_snakemake"] and after["frame"].startswith("[")
    assert after["spec"] == spec_repr


def test_a_snakemake_that_records_params_otherwise_is_left_as_it_is():
    class OtherPersistence:
        def _serialize_param(self, value):
            return repr(value)

    assert keep_pandas_out_of_job_records(OtherPersistence) is False
    assert keep_pandas_out_of_job_records(None) is False
    assert not hasattr(OtherPersistence, "_serialize_param_pandas")
