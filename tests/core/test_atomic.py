"""Atomic publication: a file appears whole or not at all, and files that go together
appear together."""

from __future__ import annotations

import errno

import pytest

from storbench.core import atomic


def test_files_written_together_appear_only_when_every_one_is_written(tmp_path):
    table, series = tmp_path / "it1.parquet", tmp_path / "it1.timeseries.parquet"
    with (
        pytest.raises(RuntimeError, match="the series could not be made"),
        atomic.atomic_outputs(table, series) as (table_tmp, _),
    ):
        table_tmp.write_text("rows\n")
        raise RuntimeError("the series could not be made")
    assert list(tmp_path.iterdir()) == []  # neither file, no temporary file
    with atomic.atomic_outputs(table, series) as (table_tmp, series_tmp):
        table_tmp.write_text("rows\n")
        series_tmp.write_text("intervals\n")
    assert (table.read_text(), series.read_text()) == ("rows\n", "intervals\n")


def test_a_write_error_that_names_no_file_names_the_output(tmp_path):
    """pyarrow's error on a full disk: '[Errno 28] Error writing bytes to file', no file."""
    output = tmp_path / "summary.parquet"
    with pytest.raises(OSError) as caught, atomic.atomic_output(output):
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28]")
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(output)
    assert str(caught.value) == f"[Errno 28] No space left on device: '{output}'"
    assert list(tmp_path.iterdir()) == []
