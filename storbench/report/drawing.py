"""Draw a report's figures: in parallel worker processes, and only those not drawn before.

A ``FigureJob`` names a figure, a module-level builder returning (matplotlib figure,
caption) and the arguments it draws. ``draw_figures`` keys each job on a hash of the
pickled builder and arguments plus ``code_version()`` (storbench's version and source,
matplotlib's version), takes figures whose key is in the cache folder from there, and draws
the others in a fork-started process pool (serially with one worker or one figure). The
workers use the same renderer and style as the parent (``toolkit.figure_files``), so a
figure's bytes do not depend on where or whether it was drawn. The cache keeps the figures
of the last build only: entries no job of this build used are removed. ``FiguresBeingDrawn``
starts the same drawing and returns at once, so a report makes its tables while the workers
draw (its parent process would otherwise wait, one core idle, and then work alone).
"""

from __future__ import annotations

import functools
import gc
import hashlib
import importlib.metadata
import multiprocessing
import os
import pickle
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import matplotlib

from storbench.core import atomic
from storbench.report import toolkit

PACKAGE_DIR = Path(__file__).resolve().parents[1]
CACHE_SUFFIXES = (".png", ".svg", ".txt")  # the PNG, the SVG and the caption


@dataclass(frozen=True)
class FigureJob:
    name: str
    build: Callable  # module-level (pickled by name): build(*args) -> (figure, caption)
    args: tuple = ()


Drawn = tuple[bytes, bytes, str]  # (PNG bytes, SVG bytes, caption)


def workers_available() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0))


@functools.cache
def code_version() -> str:
    """storbench's version and a hash of its source, with matplotlib's version: a figure
    drawn by other code is never taken from the cache."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode())
        digest.update(path.read_bytes())
    try:
        version = importlib.metadata.version("storbench")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return f"storbench {version} {digest.hexdigest()[:16]} matplotlib {matplotlib.__version__}"


def figure_key(name: str, payload: bytes) -> str:
    digest = hashlib.sha256(code_version().encode())
    digest.update(name.encode())
    digest.update(payload)
    return f"{name}-{digest.hexdigest()[:32]}"


def draw_figures(
    jobs: list[FigureJob], cache_dir: str | os.PathLike | None = None, workers: int | None = None
) -> dict[str, Drawn]:
    """{name: (PNG, SVG, caption)} of each job, in job order; ``workers``: processes to draw
    in (default: the cores available); ``cache_dir``: None draws everything."""
    with FiguresBeingDrawn(jobs, cache_dir, workers) as figures:
        return figures.result()


class FiguresBeingDrawn:
    """``draw_figures`` started: the figures not in the cache are drawn by worker processes
    from construction on while the caller does other work; ``result()`` waits for them. Used
    as a context manager, leaving it stops the workers (a failure of that other work does not
    wait for every figure)."""

    def __init__(
        self,
        jobs: list[FigureJob],
        cache_dir: str | os.PathLike | None = None,
        workers: int | None = None,
    ):
        payloads = {job.name: pickle.dumps((job.build, job.args), protocol=5) for job in jobs}
        self._names = list(payloads)
        self._keys = {name: figure_key(name, payload) for name, payload in payloads.items()}
        self._cache = Path(cache_dir) if cache_dir is not None else None
        self._drawn: dict[str, Drawn] = {}
        if self._cache is not None:
            for name, key in self._keys.items():
                cached = _cached(self._cache, key)
                if cached is not None:
                    self._drawn[name] = cached
        self._missing = [name for name in payloads if name not in self._drawn]
        self._serial = [payloads[name] for name in self._missing]  # drawn by result() here
        self._pool: ProcessPoolExecutor | None = None
        self._futures: list = []
        workers = min(workers or workers_available(), len(self._missing))
        if workers > 1:
            self._futures, self._serial = self._submit(self._serial, workers), []

    def _submit(self, payloads: list[bytes], workers: int) -> list:
        # the most data first (drawing time grows with it): no large figure is left for the end
        order = sorted(range(len(payloads)), key=lambda index: -len(payloads[index]))
        # fork: the workers start with storbench, pandas and matplotlib already imported
        context = multiprocessing.get_context("fork")
        # the parent's objects out of the workers' garbage collection: it would copy every page;
        # a fork-started pool forks all its workers at the first submit, so the parent's own
        # collection comes back right after
        gc.freeze()
        try:
            self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
            submitted = {index: self._pool.submit(draw, payloads[index]) for index in order}
        finally:
            gc.unfreeze()
        return [submitted[index] for index in range(len(payloads))]

    def result(self) -> dict[str, Drawn]:
        """{name: (PNG, SVG, caption)} of each job, in job order, once all are drawn."""
        if self._futures:
            figures = [future.result() for future in self._futures]
        else:
            figures = [draw(payload) for payload in self._serial]
        for name, figure in zip(self._missing, figures, strict=True):
            self._drawn[name] = figure
            if self._cache is not None:
                _store(self._cache, self._keys[name], figure)
        if self._cache is not None:
            _prune(self._cache, set(self._keys.values()))
        return {name: self._drawn[name] for name in self._names}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> FiguresBeingDrawn:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def draw(payload: bytes) -> Drawn:
    """A pickled (build, args) drawn and rendered: the work of one pool task."""
    build, args = pickle.loads(payload)
    return toolkit.figure_files(lambda: build(*args))


def _cached(cache: Path, key: str) -> Drawn | None:
    try:
        png, svg, caption = (cache / f"{key}{suffix}" for suffix in CACHE_SUFFIXES)
        return png.read_bytes(), svg.read_bytes(), caption.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _store(cache: Path, key: str, figure: Drawn) -> None:
    png, svg, caption = figure
    cache.mkdir(parents=True, exist_ok=True)
    # the caption last: a key with its caption file is complete
    atomic.write_bytes(cache / f"{key}.png", png)
    atomic.write_bytes(cache / f"{key}.svg", svg)
    atomic.write_bytes(cache / f"{key}.txt", caption.encode("utf-8"))


def _prune(cache: Path, keep: set[str]) -> None:
    if not cache.is_dir():
        return
    for path in cache.iterdir():
        if path.suffix in CACHE_SUFFIXES and path.stem not in keep:
            path.unlink(missing_ok=True)
