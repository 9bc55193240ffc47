"""The experiment report in a real browser: headless Chromium loads index.html with every image
decoded and nothing outside the report folder, screenshots it, and prints it to a PDF that
poppler renders to a non-blank page."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import struct
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import matplotlib.image
import pytest

from storbench.core import results
from storbench.report import experiment as report
from storbench.report import pdf
from storbench.report.extra_figures import HISTOGRAM_FIGURE
from storbench.report.figures import PER_HOST_FIGURE, TIMESERIES_FIGURE
from tests.report.test_report import ALL_FIGURES, META, campaign_rows

# these rows have no per-interval series: the page leaves the empty time-series figure out;
# their histogram bins add the latency histogram (after the main figures, before per-host)
SHOWN_FIGURES = tuple(
    shown
    for name in ALL_FIGURES
    if name != TIMESERIES_FIGURE
    for shown in ((HISTOGRAM_FIGURE, name) if name == PER_HOST_FIGURE else (name,))
)

PNG_SIZE_OFFSET = 16  # width and height follow the signature and the IHDR chunk header
PDF_POINTS_PER_INCH = 72
RASTER_DPI = 50
TITLE = "Campaign <exp>"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only, always


def running_under_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def require_tool(name: str, path: str | None, package: str) -> str:
    """The tool's path; without it, skip on a developer machine and fail under CI."""
    if path:
        return path
    message = f"{name} not found on PATH (Debian package {package}; `make test-packages`)"
    if running_under_ci():
        pytest.fail(f"CI must install it: {message}")
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> str:
    return require_tool("chromium", pdf.find_browser(), "chromium")


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    """reports/exp/ of a real report built from the campaign rows of tests/report/test_report.py."""
    root = tmp_path_factory.mktemp("campaign")
    raw = root / "results" / "summary.parquet"
    raw.parent.mkdir()
    results.write_rows(campaign_rows(), raw)
    out_dir = root / "reports" / "exp"
    report.build_report(raw, out_dir, title=TITLE, meta=META)
    return out_dir


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == pdf.PNG_MAGIC, f"{path} is not a PNG"
    return struct.unpack(">II", data[PNG_SIZE_OFFSET : PNG_SIZE_OFFSET + 8])


def assert_not_blank(path: Path) -> None:
    pixels = matplotlib.image.imread(path)[..., :3]  # RGB in [0, 1]
    assert pixels.min() < 0.5, f"{path} has no dark pixel: blank page"
    assert (pixels < 1.0).any(axis=-1).mean() > 0.001, f"{path} is almost all white"


# --- The report in Chromium through chromedriver's W3C WebDriver API on loopback -----------


class WebDriver:
    """The few W3C WebDriver commands these tests need, sent to chromedriver on loopback."""

    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"
        self.session = ""

    def call(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with NO_PROXY.open(request, timeout=120) as response:
                return json.load(response)["value"]
        except urllib.error.HTTPError as error:
            raise AssertionError(f"chromedriver {method} {path}: {error.read().decode()}") from None

    def start(self, browser: str, args: list[str]) -> None:
        options = {"binary": browser, "args": args}
        capabilities = {"browserName": "chrome", "goog:chromeOptions": options}
        value = self.call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})
        self.session = value["sessionId"]

    def open(self, url: str) -> None:
        self.call("POST", f"/session/{self.session}/url", {"url": url})

    def run(self, script: str):
        body = {"script": script, "args": []}
        return self.call("POST", f"/session/{self.session}/execute/sync", body)

    def quit(self) -> None:
        self.call("DELETE", f"/session/{self.session}")


def start_chromedriver(chromedriver: str) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [chromedriver, "--port=0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    marker = "started successfully on port "
    for line in process.stdout:
        if marker in line:
            port = int(line.split(marker)[1].strip().rstrip("."))
            threading.Thread(target=process.stdout.read, daemon=True).start()  # drain the pipe
            return process, port
    raise AssertionError(f"chromedriver exited with status {process.wait()} before listening")


@contextlib.contextmanager
def chromium_session(browser: str, profile: Path, window: str):
    """A WebDriver session of headless Chromium (``window``: '1280,2000'), ended after."""
    chromedriver = require_tool("chromedriver", shutil.which("chromedriver"), "chromium-driver")
    process, port = start_chromedriver(chromedriver)
    driver = WebDriver(port)
    started = False
    try:
        driver.start(browser, [*pdf.headless_flags(profile), f"--window-size={window}"])
        started = True
        yield driver
    finally:
        # quit ends Chromium; a failure in the with-block skipped it and left Chromium running
        if started:
            with contextlib.suppress(Exception):
                driver.quit()
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def loaded_report(browser, report_dir, tmp_path_factory):
    """A WebDriver session with reports/exp/index.html loaded."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    with chromium_session(browser, profile, "1280,2000") as driver:
        driver.open((report_dir / "index.html").as_uri())
        yield driver


IMAGES_SCRIPT = """
return Array.from(document.images, img => ({
  complete: img.complete, width: img.naturalWidth, height: img.naturalHeight,
  scheme: img.currentSrc.split(':')[0]}));
"""

# Every URL the document can load or link to: element attributes and CSS url(...) values.
REFERENCES_SCRIPT = """
const attributes = ['src', 'href', 'srcset', 'poster', 'data', 'action', 'xlink:href'];
const refs = [];
for (const element of document.querySelectorAll('*')) {
  for (const name of attributes) {
    const value = element.getAttribute(name);
    if (value !== null) refs.push(value);
  }
  const style = element.getAttribute('style') || '';
  for (const match of style.matchAll(/url\\(([^)]*)\\)/g)) refs.push(match[1]);
}
for (const sheet of document.styleSheets) {
  for (const rule of sheet.cssRules) {
    for (const match of rule.cssText.matchAll(/url\\(([^)]*)\\)/g)) refs.push(match[1]);
  }
}
return refs.map(ref => {
  const clean = ref.trim().replace(/^["']|["']$/g, '');
  const url = new URL(clean, document.baseURI);
  const sameDocument = url.href.split('#')[0] === document.baseURI.split('#')[0];
  return {ref: clean.slice(0, 60), href: url.href, protocol: url.protocol, host: url.host,
          path: decodeURIComponent(url.pathname),
          anchorFound: !sameDocument || !url.hash ||
                       document.getElementById(decodeURIComponent(url.hash.slice(1))) !== null};
});
"""


def test_every_image_decodes_at_its_png_size(loaded_report, report_dir):
    images = loaded_report.run(IMAGES_SCRIPT)
    assert len(images) == len(SHOWN_FIGURES)
    for image, name in zip(images, SHOWN_FIGURES, strict=True):
        assert image["complete"] and image["width"] > 0, f"broken image: figure {name}"
        assert image["scheme"] == "data"
        assert (image["width"], image["height"]) == png_size(report_dir / f"{name}.png")


def test_nothing_loaded_or_referenced_outside_the_report_folder(loaded_report, report_dir):
    loaded = loaded_report.run("return performance.getEntriesByType('resource').map(e => e.name)")
    assert [name for name in loaded if not name.startswith("data:")] == []
    references = loaded_report.run(REFERENCES_SCRIPT)
    local = [ref for ref in references if ref["protocol"] == "file:" and not ref["host"]]
    external = [
        ref["href"] for ref in references if ref["protocol"] != "data:" and ref not in local
    ]
    assert external == []
    files = [Path(ref["path"]) for ref in local]
    assert all(path.is_relative_to(report_dir) for path in files)
    assert [str(path) for path in files if not path.is_file()] == []
    assert [ref["ref"] for ref in references if not ref["anchorFound"]] == []
    # The figures' vector versions are linked, so the check above saw real file references.
    assert {f"{name}.svg" for name in SHOWN_FIGURES} <= {path.name for path in files}


def test_screenshot_is_a_png_of_the_requested_size(browser, report_dir, tmp_path):
    shot = pdf.screenshot(report_dir / "index.html", tmp_path / "report.png", 1280, 2000)
    assert shot == tmp_path / "report.png"
    assert png_size(shot) == (1280, 2000)
    assert_not_blank(shot)


# --- The PDF ------------------------------------------------------------------------------


def pdfinfo(path: Path) -> dict[str, str]:
    tool = require_tool("pdfinfo", shutil.which("pdfinfo"), "poppler-utils")
    output = subprocess.run([tool, str(path)], capture_output=True, text=True, check=True).stdout
    fields = (line.partition(":") for line in output.splitlines())
    return {key.strip(): value.strip() for key, _, value in fields}


def test_report_pdf_has_pages_and_a_non_blank_first_page(browser, report_dir, tmp_path):
    pdftoppm = require_tool("pdftoppm", shutil.which("pdftoppm"), "poppler-utils")
    written = pdf.html_to_pdf(report_dir / "index.html", report_dir / "report.pdf")
    assert written == report_dir / "report.pdf"
    assert written.read_bytes().startswith(pdf.PDF_MAGIC)
    assert not [p.name for p in report_dir.iterdir() if p.name.endswith(".tmp")]

    info = pdfinfo(written)
    assert int(info["Pages"]) >= 1
    # "Page size: 612 x 792 pts (letter)" -> the raster size of page 1 at RASTER_DPI.
    width_pt, _, height_pt = info["Page size"].split()[:3]
    prefix = tmp_path / "page"
    subprocess.run(
        [pdftoppm, "-png", "-r", str(RASTER_DPI), "-f", "1", "-l", "1", "-singlefile"]
        + [str(written), str(prefix)],
        check=True,
    )
    page = prefix.with_suffix(".png")
    expected = [float(size) * RASTER_DPI / PDF_POINTS_PER_INCH for size in (width_pt, height_pt)]
    assert png_size(page) == pytest.approx(expected, abs=1)
    assert_not_blank(page)

    pdftotext = require_tool("pdftotext", shutil.which("pdftotext"), "poppler-utils")
    text = subprocess.run(
        [pdftotext, "-f", "1", "-l", "1", str(written), "-"], capture_output=True, text=True
    ).stdout
    assert TITLE in text


def test_several_reports_print_in_one_browser(browser, tmp_path, monkeypatch):
    launches = tmp_path / "launches.txt"
    prints = _record_prints(monkeypatch)
    counting = write_stand_in_browser(
        tmp_path / "chromium", f'echo launched >> "{launches}"\nexec "{browser}" "$@"\n'
    )
    pages = []
    for name in ("first", "second", "third"):
        page = tmp_path / f"{name}.html"
        page.write_text(f"<html><body><h1>Report {name}</h1><p>{name} page</p></body></html>")
        pages.append((page, tmp_path / name / "report.pdf"))
    written = pdf.print_pdfs(pages, browser=counting)
    assert written == [out for _, out in pages]
    assert launches.read_text() == "launched\n"
    pdftotext = require_tool("pdftotext", shutil.which("pdftotext"), "poppler-utils")
    for (_, out), name in zip(pages, ("first", "second", "third"), strict=True):
        info = pdfinfo(out)
        assert (info["Pages"], info["Page size"]) == ("1", "612 x 792 pts (letter)")
        text = subprocess.run([pdftotext, str(out), "-"], capture_output=True, text=True).stdout
        assert text.split() == ["Report", name, name, "page"]
    # one print at a time: three tabs printing at once left one unanswered once in 150 times
    assert prints == ["asked", "answered"] * 3


def _record_prints(monkeypatch) -> list[str]:
    """'asked' and 'answered' in the order the browser is asked for a page's PDF and answers."""
    from storbench.report import devtools

    prints: list[str] = []
    send, result = devtools.Browser.send, devtools.Browser.result
    printing: set[int] = set()

    def recorded_send(self, method, params=None, session=None):
        command = send(self, method, params, session)
        if method == "Page.printToPDF":
            prints.append("asked")
            printing.add(command)
        return command

    def recorded_result(self, command, *, deadline):
        answer = result(self, command, deadline=deadline)
        if command in printing:
            prints.append("answered")
        return answer

    monkeypatch.setattr(devtools.Browser, "send", recorded_send)
    monkeypatch.setattr(devtools.Browser, "result", recorded_result)
    return prints


class RecordingHandler(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self):
        self.requests.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_pdf_printing_does_not_reach_the_network(browser, tmp_path):
    RecordingHandler.requests = []
    server = http.server.HTTPServer(("127.0.0.1", 0), RecordingHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_port
        with pytest.raises(urllib.error.HTTPError):  # the server answers a direct request
            NO_PROXY.open(f"http://127.0.0.1:{port}/probe", timeout=30)
        assert RecordingHandler.requests == ["/probe"]
        page = tmp_path / "remote.html"
        page.write_text(
            f'<html><head><link rel="stylesheet" href="http://localhost:{port}/style.css">'
            f'</head><body><h1>Offline</h1><img src="http://127.0.0.1:{port}/by-ip.png">'
            f'<img src="http://localhost:{port}/by-name.png"></body></html>'
        )
        pdf.html_to_pdf(page, tmp_path / "remote.pdf")
        assert RecordingHandler.requests == ["/probe"]
    finally:
        server.shutdown()
        server.server_close()
    assert (tmp_path / "remote.pdf").read_bytes().startswith(pdf.PDF_MAGIC)


# --- Errors -------------------------------------------------------------------------------


def test_missing_browser_names_the_file(tmp_path, monkeypatch):
    page = tmp_path / "index.html"
    page.write_text("<p>x</p>")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert pdf.find_browser() is None
    with pytest.raises(pdf.PdfError, match=r"print .*index\.html to PDF: no browser on PATH"):
        pdf.html_to_pdf(page, tmp_path / "report.pdf")
    assert not (tmp_path / "report.pdf").exists()


def test_missing_html_is_named(tmp_path):
    with pytest.raises(pdf.PdfError, match=r"HTML file .*nothing\.html does not exist"):
        pdf.html_to_pdf(tmp_path / "nothing.html", tmp_path / "report.pdf")


def write_stand_in_browser(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_failing_browser_reports_status_and_stderr_tail(tmp_path):
    page = tmp_path / "index.html"
    page.write_text("<p>x</p>")
    failing = write_stand_in_browser(
        tmp_path / "chromium",
        "echo 'ERROR:dbus/bus.cc Failed to connect to the bus' >&2\n"
        "echo 'FATAL: cannot open the output file' >&2\nexit 3\n",
    )
    with pytest.raises(pdf.PdfError) as raised:
        pdf.html_to_pdf(page, tmp_path / "report.pdf", browser=failing)
    message = str(raised.value)
    assert f"{failing} failed to render {page} to {tmp_path / 'report.pdf'}" in message
    assert "(exit status 3)" in message
    assert message.endswith("stderr tail:\nFATAL: cannot open the output file")
    assert not (tmp_path / "report.pdf").exists()


def test_browser_that_writes_nothing_is_an_error(tmp_path):
    page = tmp_path / "index.html"
    page.write_text("<p>x</p>")
    silent = write_stand_in_browser(tmp_path / "chromium", "exit 0\n")
    with pytest.raises(pdf.PdfError, match="exited without writing a PNG"):
        pdf.screenshot(page, tmp_path / "shot.png", browser=silent)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["chromium", "index.html"]
