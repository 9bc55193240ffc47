"""Result files read back in the current schema, whatever version wrote them."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from storbench.core import results


def test_rows_written_read_back_with_their_values(tmp_path):
    path = tmp_path / "it1.parquet"
    results.write_rows(
        [
            {"experiment": "e", "run_id": "r", "iteration": 1, "host": "h1", "bw_bytes_s": 2.5e8},
            {"experiment": "e", "run_id": "r", "iteration": 1, "hist_ns": [100, 200]},
        ],
        path,
    )
    table = results.read_parquet([path, path])
    assert table.schema.equals(results.SCHEMA)
    assert table.column("bw_bytes_s").to_pylist() == [2.5e8, None, 2.5e8, None]
    assert table.column("hist_ns").to_pylist() == [None, [100, 200], None, [100, 200]]
    assert table.column("schema_version").to_pylist() == [results.SCHEMA_VERSION] * 4


def test_an_earlier_file_gets_nulls_for_the_columns_it_lacks_and_the_current_types(tmp_path):
    earlier = pa.table(
        {
            "experiment": ["e"],
            "iteration": pa.array([3], pa.int64()),  # wider than the schema's int32
            "retired_column": ["gone"],
        }
    )
    path = tmp_path / "v1.parquet"
    pq.write_table(earlier, path)
    table = results.read_parquet(path)
    assert table.schema.equals(results.SCHEMA)
    assert table.column("iteration").to_pylist() == [3]
    assert table.column("iteration").type == pa.int32()
    assert table.column("host").to_pylist() == [None]
    assert "retired_column" not in table.column_names
    # the same as pyarrow's own reading in a schema
    assert table.equals(pq.read_table(path, schema=results.SCHEMA))


def test_no_file_is_an_empty_table_in_the_schema():
    assert results.read_parquet([]).schema.equals(results.SCHEMA)
    assert results.read_parquet([], results.TIMESERIES_SCHEMA).num_rows == 0


def test_reading_results_does_not_import_pandas(tmp_path):
    path = tmp_path / "it1.parquet"
    results.write_rows([{"experiment": "e", "run_id": "r", "iteration": 1}], path)
    probe = (
        "import sys; from storbench.core import results; "
        f"results.read_parquet([{str(path)!r}]); print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_rows_become_a_table_without_importing_pandas_which_still_works_after():
    # pyarrow imports pandas to ask whether a column is a pandas object: 0.2 s per parse job
    probe = (
        "import sys\n"
        "from storbench.core import results\n"
        "table = results.table_from_rows([{'experiment': 'e', 'iteration': 2, 'p99_ns': 7.5e4}])\n"
        "print('pandas' in sys.modules)\n"
        "frame = table.to_pandas()\n"
        "print(frame['iteration'].tolist(), frame['p99_ns'].tolist())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["False", "[2] [75000.0]"]


def test_cpu_columns_are_measures_and_a_v5_file_reads_with_them_null(tmp_path):
    assert {"cpu_pct", "cpu_sys_pct"} <= set(results.MEASURES)
    row = {"experiment": "e", "run_id": "r", "iteration": 1, "cpu_pct": -1.0}
    try:
        results.table_from_rows([row])
    except results.ResultValueError as error:
        assert "cpu_pct = -1.0" in str(error)
    else:
        raise AssertionError("a negative CPU figure was accepted")
    v5 = pa.table({"experiment": ["e"], "bw_bytes_s": [1.0], "schema_version": [5]})
    pq.write_table(v5, tmp_path / "v5.parquet")
    table = results.read_parquet(tmp_path / "v5.parquet")
    assert table.column("cpu_pct").to_pylist() == [None]
    assert table.column("cpu_basis").to_pylist() == [None]
    assert table.column("schema_version").to_pylist() == [5]
