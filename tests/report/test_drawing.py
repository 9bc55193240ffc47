"""Figures drawn in parallel and cached (storbench.report.drawing) through build_report."""

from __future__ import annotations

import io
import os
import pickle
import time

import matplotlib.figure
import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pytest

from storbench.core import results
from storbench.report import drawing, toolkit
from storbench.report import experiment as report
from tests.report.synthetic_sweep import report_meta, synthetic_rows

# 16 runs: iodepth and numjobs both vary (the heat map) and the rows keep histogram bins
SWEEP = {"rw": ["read", "randwrite"], "bs": ["4k", "64k"], "iodepth": [1, 8], "numjobs": [1, 4]}
FIGURES = [
    "bandwidth",
    "iops_vs_iodepth",
    "latency_percentiles",
    "latency_cdf",
    "latency_vs_iops",
    "timeseries",
    "per_host",
    "latency_histogram",
    "iodepth_numjobs",
]
CHANGED_RUN = "read_bs4k_qd1_nj1"


@pytest.fixture(scope="module")
def rows():
    return synthetic_rows(SWEEP)


def write_summary(rows, path):
    results.write_rows(rows, path)
    return path


def build(summary, out_dir, **options):
    meta = report_meta(SWEEP)
    return report.build_report(summary, out_dir, title=meta["title"], meta=meta, **options)


def figure_files(out_dir) -> dict[str, bytes]:
    return {
        f"{name}{suffix}": (out_dir / f"{name}{suffix}").read_bytes()
        for name in FIGURES
        for suffix in (".png", ".svg")
    }


@pytest.fixture
def drawn(monkeypatch):
    """The builders of the figures drawn in this process (workers=1 draws them here)."""
    names = []
    original = drawing.draw

    def counting_draw(payload):
        names.append(pickle.loads(payload)[0].__name__)
        return original(payload)

    monkeypatch.setattr(drawing, "draw", counting_draw)
    return names


def test_parallel_figures_equal_the_serial_ones(rows, tmp_path, monkeypatch):
    summary = write_summary(rows, tmp_path / "summary.parquet")
    pools = []
    original_pool = drawing.ProcessPoolExecutor

    def counted_pool(*args, **kwargs):
        pools.append(kwargs["max_workers"])
        return original_pool(*args, **kwargs)

    monkeypatch.setattr(drawing, "ProcessPoolExecutor", counted_pool)
    serial = build(summary, tmp_path / "serial", workers=1)
    assert pools == []
    parallel = build(summary, tmp_path / "parallel", workers=2)
    assert pools == [2]
    assert sorted(serial) == sorted(parallel)
    serial_files = figure_files(tmp_path / "serial")
    assert serial_files == figure_files(tmp_path / "parallel")
    for name in FIGURES:
        pixels = [
            matplotlib.image.imread(tmp_path / d / f"{name}.png") for d in ("serial", "parallel")
        ]
        assert pixels[0].shape[2] == 4 and pixels[0].shape[0] > 100
        assert np.array_equal(*pixels)
    assert (tmp_path / "serial/index.html").read_bytes() == (
        tmp_path / "parallel/index.html"
    ).read_bytes()


def test_second_build_draws_nothing_and_writes_the_same_files(rows, tmp_path, drawn):
    summary = write_summary(rows, tmp_path / "summary.parquet")
    cache = tmp_path / "cache"
    build(summary, tmp_path / "first", figure_cache=cache, workers=1)
    assert len(drawn) == len(FIGURES)
    # one PNG, SVG and caption per figure
    assert len(list(cache.iterdir())) == 3 * len(FIGURES)
    drawn.clear()
    build(summary, tmp_path / "second", figure_cache=cache, workers=1)
    assert drawn == []
    assert figure_files(tmp_path / "first") == figure_files(tmp_path / "second")
    assert (tmp_path / "first/index.html").read_bytes() == (
        tmp_path / "second/index.html"
    ).read_bytes()


def test_changed_run_redraws_only_the_figures_drawing_its_data(rows, tmp_path, drawn):
    summary = write_summary(rows, tmp_path / "summary.parquet")
    cache = tmp_path / "cache"
    build(summary, tmp_path / "before", figure_cache=cache, workers=1)
    drawn.clear()
    # the client host's bandwidth of one run's iteration: only the per-host bars show it
    changed = [
        {**row, "bw_bytes_s": row["bw_bytes_s"] / 2}
        if (row["run_id"], row["iteration"], row["host"]) == (CHANGED_RUN, 1, "localhost")
        else row
        for row in rows
    ]
    assert sum(a != b for a, b in zip(rows, changed, strict=True)) == 1
    changed_summary = write_summary(changed, tmp_path / "changed.parquet")
    build(changed_summary, tmp_path / "after", figure_cache=cache, workers=1)
    assert drawn == ["per_host_figure"]
    before, after = figure_files(tmp_path / "before"), figure_files(tmp_path / "after")
    assert {name for name in before if before[name] != after[name]} == {
        "per_host.png",
        "per_host.svg",
    }
    # the cache keeps the figures of the last build only
    assert len(list(cache.iterdir())) == 3 * len(FIGURES)
    # a figure from the cache equals one drawn afresh
    build(changed_summary, tmp_path / "fresh", workers=1)
    assert figure_files(tmp_path / "fresh") == after


def test_code_version_names_storbench_and_matplotlib():
    version = drawing.code_version()
    assert version.startswith("storbench ")
    assert f"matplotlib {matplotlib.__version__}" in version
    assert drawing.figure_key("bandwidth", b"x") != drawing.figure_key("bandwidth", b"y")
    assert drawing.figure_key("bandwidth", b"x").startswith("bandwidth-")


def placeholder_engine_files(fig) -> tuple[bytes, bytes]:
    """A figure's PNG and SVG as render_figure wrote them before: the SVG under matplotlib's
    placeholder layout engine ("none"), which still makes savefig run a layout pass."""
    png, svg = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=toolkit.FIGURE_DPI, metadata=toolkit.PNG_METADATA)
    fig.set_layout_engine("none")
    fig.savefig(svg, format="svg", metadata=toolkit.SVG_METADATA)
    return png.getvalue(), svg.getvalue()


def test_the_svg_is_drawn_once_in_the_layout_of_the_png(rows, tmp_path, monkeypatch):
    payloads = []
    draw = drawing.draw

    def kept_draw(payload):
        payloads.append(payload)
        return draw(payload)

    monkeypatch.setattr(drawing, "draw", kept_draw)
    build(write_summary(rows, tmp_path / "summary.parquet"), tmp_path / "out", workers=1)
    assert len(payloads) == len(FIGURES)
    passes = []
    original_draw = matplotlib.figure.Figure.draw

    def counted_draw(self, renderer):
        passes.append(type(renderer).__name__)
        return original_draw(self, renderer)

    for payload in payloads:
        builder, args = pickle.loads(payload)
        with toolkit.style():
            fig, _ = builder(*args)
            passes.clear()
            with monkeypatch.context() as counting:
                counting.setattr(matplotlib.figure.Figure, "draw", counted_draw)
                png, svg = toolkit.render_figure(fig)
            # the PNG: a layout pass and its drawing; the SVG: its drawing only (before: 2)
            assert passes == ["RendererAgg", "RendererAgg", "MixedModeRenderer"], builder.__name__
            assert fig.get_layout_engine() is None
            plt.close(fig)
            fig, _ = builder(*args)
            assert (png, svg) == placeholder_engine_files(fig), builder.__name__
            plt.close(fig)


def figure_once_released(release: str):
    """A small figure, drawn once the file ``release`` exists (a minute at most)."""
    deadline = time.monotonic() + 60
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{release} never appeared: the drawing was waited for")
        time.sleep(0.01)
    fig, (ax,) = toolkit.new_figure(height_in=1.5)
    ax.plot([1, 2, 3], [len(release), 0, 1])
    return fig, f"released by {os.path.basename(release)}"


def test_figures_are_drawn_while_the_caller_goes_on(tmp_path):
    release = tmp_path / "release"
    jobs = [
        drawing.FigureJob(f"figure{index}", figure_once_released, (str(release),))
        for index in range(3)
    ]
    with drawing.FiguresBeingDrawn(jobs, tmp_path / "cache", workers=2) as being_drawn:
        # the workers wait for this file: had the constructor waited for them, it never would
        release.touch()
        drawn = being_drawn.result()
    assert list(drawn) == ["figure0", "figure1", "figure2"]
    assert {caption for _, _, caption in drawn.values()} == {"released by release"}
    serial = drawing.draw_figures(jobs, workers=1)
    assert drawn == serial
    # all three in the cache: the next build takes them from there
    assert len(list((tmp_path / "cache").iterdir())) == 3 * len(jobs)
