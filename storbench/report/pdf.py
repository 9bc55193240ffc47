"""Print offline HTML reports to PDF, or screenshot one, with headless Chromium.

The browser runs with a throwaway profile and every host name and IP address mapped to
"not found", so a report that references anything outside its own file cannot reach the
network. Several reports print in one browser (``print_pdfs``, over the DevTools protocol:
storbench.report.devtools), each in its own tab. Each output is published atomically: a
failed print leaves no file under its name.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from storbench.core.atomic import atomic_output
from storbench.report import devtools

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")
PDF_MAGIC = b"%PDF-"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
STDERR_TAIL_LINES = 15
# What `chromium --print-to-pdf --no-pdf-header-footer` asks for: US Letter unless the page
# sets its size, backgrounds printed, no header or footer.
PRINT_OPTIONS = {"printBackground": True, "preferCSSPageSize": True, "displayHeaderFooter": False}


class PdfError(RuntimeError):
    """Chromium is missing, failed, timed out or wrote no usable output."""


def find_browser() -> str | None:
    """The first of chromium, chromium-browser, google-chrome found on PATH, else None."""
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def headless_flags(profile_dir: str | os.PathLike) -> list[str]:
    """Flags for a headless, offline Chromium with its profile in ``profile_dir``."""
    return [
        "--headless",
        "--no-sandbox",  # CI runs as root, where Chromium refuses to start with its sandbox
        "--disable-gpu",
        f"--user-data-dir={profile_dir}",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-component-update",
        "--disable-background-networking",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-domain-reliability",
        "--dns-prefetch-disable",
        "--no-proxy-server",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # host names and IP literals alike: offline
        "--hide-scrollbars",
        "--mute-audio",
    ]


def html_to_pdf(
    html_path: str | os.PathLike,
    pdf_path: str | os.PathLike,
    *,
    timeout_s: float = 120,
    browser: str | None = None,
) -> Path:
    """Print the HTML file to ``pdf_path``: Chromium's default US Letter pages, no header/footer."""
    (written,) = print_pdfs([(html_path, pdf_path)], timeout_s=timeout_s, browser=browser)
    return written


def print_pdfs(
    pages: list[tuple[str | os.PathLike, str | os.PathLike]],
    *,
    timeout_s: float = 120,
    browser: str | None = None,
) -> list[Path]:
    """Print each (HTML file, PDF path) like ``html_to_pdf``, all in one Chromium, every
    page loading at once in a tab of its own (its own renderer), then printed one at a time
    (tabs printing at once left a print unanswered about once in 150 times);
    ``timeout_s`` for each page's load and for its print."""
    resolved = [(_existing_html(html), _pdf_output(out)) for html, out in pages]
    names = ", ".join(str(html) for html, _ in resolved)
    browser = _browser_or_error(browser, f"print {names} to PDF")
    with tempfile.TemporaryDirectory(prefix="storbench-chromium-") as work:
        stderr_path = Path(work) / "stderr.txt"
        session = devtools.Browser([browser, *headless_flags(Path(work) / "profile")], stderr_path)
        try:
            tabs = []
            for html, out in resolved:
                with _as_pdf_error(session, browser, html, out, timeout_s, stderr_path):
                    tabs.append(_open_page(session, browser, html, timeout_s))
            printed = []
            for tab, (html, out) in zip(tabs, resolved, strict=True):
                with _as_pdf_error(session, browser, html, out, timeout_s, stderr_path):
                    printed.append(_print_tab(session, browser, tab, html, out, timeout_s))
            return printed
        finally:
            session.close()


@dataclass
class _Tab:
    target: str
    session: str
    loader: str | None


def _open_page(session, browser: str, html: Path, timeout_s: float) -> _Tab:
    """A new tab navigating to html (not waiting for it to load)."""
    deadline = time.monotonic() + timeout_s
    target = session.call("Target.createTarget", {"url": "about:blank"}, deadline=deadline)
    tab = session.call(
        "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
        deadline=deadline,
    )["sessionId"]  # fmt: skip
    session.call("Page.enable", session=tab, deadline=deadline)
    session.call("Page.setLifecycleEventsEnabled", {"enabled": True}, tab, deadline=deadline)
    navigation = session.call("Page.navigate", {"url": html.as_uri()}, tab, deadline=deadline)
    if navigation.get("errorText"):
        raise PdfError(f"{browser} could not open {html}: {navigation['errorText']}")
    return _Tab(target["targetId"], tab, navigation.get("loaderId"))


def _print_tab(session, browser: str, tab: _Tab, html: Path, out: Path, timeout_s: float):
    """Once the tab's page has loaded, its PDF, published atomically at out; the tab closed."""
    deadline = time.monotonic() + timeout_s
    session.wait_event(
        "Page.lifecycleEvent",
        lambda event: event.get("name") == "load" and event.get("loaderId") == tab.loader,
        deadline=deadline,
    )
    deadline = time.monotonic() + timeout_s
    printed = session.call("Page.printToPDF", PRINT_OPTIONS, tab.session, deadline=deadline)
    session.call("Target.closeTarget", {"targetId": tab.target}, deadline=deadline)
    data = base64.b64decode(printed.get("data", ""))
    if not data.startswith(PDF_MAGIC):
        raise PdfError(f"{browser} exited without writing a PDF of {html} to {out}")
    with atomic_output(out) as tmp:
        tmp.write_bytes(data)
    return out


@contextlib.contextmanager
def _as_pdf_error(session, browser: str, html: Path, out: Path, timeout_s: float, stderr_path):
    """The browser's failures while rendering html, as a PdfError naming the page."""
    try:
        yield
    except devtools.BrowserTimeout:
        session.kill()
        raise PdfError(
            f"{browser} did not render {html} to {out} within {timeout_s:g} s"
            f"{_stderr_tail(_read_text(stderr_path))}"
        ) from None
    except devtools.BrowserExited as exited:
        raise PdfError(
            f"{browser} failed to render {html} to {out} "
            f"(exit status {exited.status}){_stderr_tail(_read_text(stderr_path))}"
        ) from None
    except devtools.CommandError as error:
        raise PdfError(f"{browser} could not print {html} to {out}: {error}") from None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def screenshot(
    html_path: str | os.PathLike,
    png_path: str | os.PathLike,
    width: int = 1280,
    height: int = 2000,
    *,
    timeout_s: float = 120,
    browser: str | None = None,
) -> Path:
    """Write a ``width`` x ``height`` PNG of the top of the rendered HTML file."""
    html_path = _existing_html(html_path)
    browser = _browser_or_error(browser, f"take a screenshot of {html_path}")
    with tempfile.TemporaryDirectory(prefix="storbench-chromium-") as work:
        rendered = Path(work) / "out.png"
        extra = [f"--window-size={width},{height}", f"--screenshot={rendered}"]
        _run_browser(browser, work, extra, html_path, png_path, timeout_s)
        return _publish(rendered, png_path, PNG_MAGIC, browser, html_path)


def _existing_html(html_path: str | os.PathLike) -> Path:
    html_path = Path(html_path).resolve()
    if not html_path.is_file():
        raise PdfError(f"HTML file {html_path} does not exist")
    with html_path.open("rb") as page:
        start = page.read(512).lstrip(b"\xef\xbb\xbf \t\r\n")
    if not start.startswith(b"<"):
        raise PdfError(f"{html_path} is not an HTML page (it does not start with a tag)")
    return html_path


def _pdf_output(pdf_path: str | os.PathLike) -> Path:
    """Where a PDF goes: never over a file that is not a PDF (a report page given as --pdf)."""
    pdf_path = Path(pdf_path)
    if pdf_path.is_file():
        with pdf_path.open("rb") as existing:
            if not existing.read(len(PDF_MAGIC)).startswith(PDF_MAGIC):
                raise PdfError(f"{pdf_path} exists and is not a PDF: not overwritten")
    return pdf_path


def _browser_or_error(browser: str | None, action: str) -> str:
    found = browser or find_browser()
    if found is None:
        raise PdfError(
            f"cannot {action}: no browser on PATH (looked for {', '.join(BROWSER_NAMES)}); "
            "install Debian's chromium package"
        )
    if shutil.which(found) is None:
        raise PdfError(f"cannot {action}: browser {found} is not an executable")
    return found


def _run_browser(
    browser: str, work: str, extra: list[str], html_path: Path, out_path, timeout_s: float
) -> None:
    command = [browser, *headless_flags(Path(work) / "profile"), *extra, html_path.as_uri()]
    # Own session: on a timeout the renderer and zygote children die with the browser.
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        _, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        raise PdfError(
            f"{browser} did not render {html_path} to {out_path} within {timeout_s:g} s"
            f"{_stderr_tail(stderr)}"
        ) from None
    if process.returncode != 0:
        raise PdfError(
            f"{browser} failed to render {html_path} to {out_path} "
            f"(exit status {process.returncode}){_stderr_tail(stderr)}"
        )


def _publish(rendered: Path, out_path, magic: bytes, browser: str, html_path: Path) -> Path:
    out_path = Path(out_path)
    if not rendered.is_file() or _head(rendered, len(magic)) != magic:
        kind = "PDF" if magic == PDF_MAGIC else "PNG"
        raise PdfError(f"{browser} exited without writing a {kind} of {html_path} to {out_path}")
    with atomic_output(out_path) as tmp:
        shutil.copyfile(rendered, tmp)
    return out_path


def _head(path: Path, size: int) -> bytes:
    with path.open("rb") as file:
        return file.read(size)


def _stderr_tail(stderr: str) -> str:
    # Headless Chromium without a session bus logs dbus errors that bury the real one.
    lines = [line for line in stderr.splitlines() if line.strip() and "dbus" not in line]
    if not lines:
        return ""
    return "; stderr tail:\n" + "\n".join(lines[-STDERR_TAIL_LINES:])
