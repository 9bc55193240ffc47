"""fio --parse-only's verdict on a job, kept between processes (a Snakemake start each)."""

from __future__ import annotations

import json
import shutil

import pytest

from storbench.tools import fio_options

FIO = shutil.which("fio")
BAD_JOB = [{"ioengin": "libaio", "rw": "randread", "iodepth": 4}]
FIOS_ANSWER = {"ioengin": "fio has no option 'ioengin' (did you mean 'ioengine'?)"}


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fio_options._parse_job_text.cache_clear()
    yield tmp_path / "cache" / "storbench" / "fio-parse-only"
    fio_options._parse_job_text.cache_clear()


def refuse_to_ask_fio(fio, text):
    raise AssertionError(f"fio was asked again about {text!r}")


@pytest.mark.skipif(FIO is None, reason="fio is installed by the Makefile's test-packages")
def test_fios_answer_is_kept_and_a_later_process_does_not_ask_again(fresh_cache, monkeypatch):
    assert fio_options.option_problems(BAD_JOB, frozenset()) == FIOS_ANSWER
    # fio's answer, and its answer once checked again without the option it named
    kept = sorted(json.loads(path.read_text()) for path in fresh_cache.iterdir())
    assert kept == [[], [list(item) for item in FIOS_ANSWER.items()]]

    fio_options._parse_job_text.cache_clear()  # as a new process starts
    monkeypatch.setattr(fio_options, "_ask_fio", refuse_to_ask_fio)
    assert fio_options.option_problems(BAD_JOB, frozenset()) == FIOS_ANSWER


@pytest.mark.skipif(FIO is None, reason="fio is installed by the Makefile's test-packages")
def test_another_fio_binary_is_asked_again(fresh_cache, tmp_path):
    assert fio_options.option_problems(BAD_JOB, frozenset()) == FIOS_ANSWER
    kept_before = len(list(fresh_cache.iterdir()))
    other_fio = tmp_path / "fio"
    shutil.copy2(FIO, other_fio)  # same bytes, another path: another fio as far as we know
    fio_options._parse_job_text.cache_clear()
    assert dict(fio_options._parse_job_text(str(other_fio), "[x]\nioengin=libaio\n")) == {
        "ioengin": FIOS_ANSWER["ioengin"]
    }
    assert len(list(fresh_cache.iterdir())) == kept_before + 1


def test_an_unreadable_kept_answer_is_replaced_by_fios(fresh_cache, monkeypatch):
    text = "[x]\nrw=read\n"
    kept = fio_options._cache_path("/usr/bin/true", text)
    assert kept is not None
    kept.parent.mkdir(parents=True)
    kept.write_text("{not json")
    monkeypatch.setattr(fio_options, "_ask_fio", lambda fio, text: (("rw", "why"),))
    assert fio_options._parse_job_text("/usr/bin/true", text) == (("rw", "why"),)
    assert json.loads(kept.read_text()) == [["rw", "why"]]
