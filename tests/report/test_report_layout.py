"""Layout, not existence: the experiment reports of a small sweep, of client steps (the
scale-out sections) and of a 1,000-run sweep, and the campaign report over them, in headless
Chromium at 1,400 px and as PDF pages.

On screen nothing runs off the page (no table, figure or line wider than the window) and
table text stays at its size. In the PDF every page is A4 landscape at full scale (Chromium
shrinks a page whose content is too wide: the text size shows it), no word is smaller than
5.5 pt, every figure caption is on the page of its image, and no page is blank.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from storbench.core import results
from storbench.report import campaign as campaign_report
from storbench.report import experiment as report
from storbench.report import pdf, toolkit
from tests.report import synthetic_sweep
from tests.report.test_report import (
    DATA_PATH,
    META,
    campaign_rows,
    host_facts,
    stepped_rows,
    steps_meta,
)
from tests.report.test_report_browser import chromium_session, require_tool

pytestmark = pytest.mark.browser

PAGES = ("small", "scale-out", "sweep-1000", "campaign")
# a laptop's 1,280 px and 1,400: a table wider than the window scrolls within its box
WINDOW_WIDTHS = (1280, 1400)
MIN_WORD_HEIGHT_PT = 5.5  # the print style's smallest text is 6.5 pt
A4_LANDSCAPE_PT = (842, 595)  # as Chromium writes it, to the point
SCALE_SWEEP = {**synthetic_sweep.SWEEP, "iodepth": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]}


# An NFS client's mount options and NIC list as Linux reports them: long, one "word" each
NFS_OPTIONS = (
    "rw,relatime,vers=3,rsize=1048576,wsize=1048576,namlen=255,hard,nconnect=16,proto=tcp,"
    "timeo=600,retrans=2,sec=sys,mountaddr=172.16.0.1,mountvers=3,mountport=20048,"
    "mountproto=udp,local_lock=none,addr=172.16.0.1"
)


def fleet_facts() -> dict:
    nics = [
        {"name": f"ens{n}f{port}np{port}", "speed_mbps": 100000, "mtu": 9000, "state": "up"}
        for n in (1, 2)
        for port in (0, 1)
    ]
    mount = {"path": "/mnt/vast", "source": "vip-pool:/", "fstype": "nfs", "options": NFS_OPTIONS}
    return {
        name: host_facts(name, nics=nics, target_mount=mount) for name in ("client01", "client02")
    }


def experiment_report(
    root: Path, rows: list[dict], meta: dict, name: str, telemetry: dict | None = None
) -> Path:
    summary = root / name / "summary.parquet"
    summary.parent.mkdir(parents=True)
    results.write_rows(rows, summary)
    out_dir = root / "reports" / name
    report.build_report(summary, out_dir, title=f"Report {name}", meta=meta, telemetry=telemetry)
    return out_dir / "index.html"


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("layout")
    small = experiment_report(root, campaign_rows(), META, "small", fleet_facts())
    scale_meta = {"experiment": "scale", "steps": steps_meta(), "data_path": DATA_PATH}
    scale_out = experiment_report(root, stepped_rows(), scale_meta, "scale-out")
    large = experiment_report(
        root,
        synthetic_sweep.synthetic_rows(SCALE_SWEEP),
        synthetic_sweep.report_meta(SCALE_SWEEP),
        "sweep-1000",
    )
    campaign_dir = root / "reports" / "campaign"
    summaries = [root / name / "summary.parquet" for name in ("small", "scale-out", "sweep-1000")]
    campaign_report.build_campaign_report(
        summaries, [], campaign_dir, {"title": "Campaign"}, fleet_facts()
    )
    return {
        "small": small,
        "scale-out": scale_out,
        "sweep-1000": large,
        "campaign": campaign_dir / "index.html",
    }


@pytest.fixture(scope="module", params=WINDOW_WIDTHS, ids=lambda width: f"{width}px")
def driver(tmp_path_factory, request):
    browser = require_tool("chromium", pdf.find_browser(), "chromium")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with chromium_session(browser, profile, f"{request.param},1000") as session:
        yield session


OVERFLOW_SCRIPT = """
const width = document.documentElement.clientWidth;
const wide = [];
for (const element of document.querySelectorAll('table, figure, img, pre, p, h1, h2, dl')) {
  // a wide table's box is its scrolling frame
  const box = (element.closest('.scroll') || element).getBoundingClientRect();
  if (box.width > 0 && (box.right > width + 0.5 || box.left < -0.5)) {
    const name = element.id || (element.querySelector('caption') || {}).textContent || '';
    wide.push(`${element.tagName} ${name.slice(0, 50)} ${box.left}..${box.right}`);
  }
}
const sizes = Array.from(document.querySelectorAll('td'),
                         td => parseFloat(getComputedStyle(td).fontSize));
return {scrollWidth: document.documentElement.scrollWidth, width: width, wide: wide,
        smallestCell: sizes.length ? Math.min(...sizes) : null,
        images: Array.from(document.images, img => img.complete && img.naturalWidth > 0)};
"""


@pytest.mark.parametrize("name", PAGES)
def test_nothing_runs_off_the_page(driver, pages, name):
    driver.open(pages[name].as_uri())
    layout = driver.run(OVERFLOW_SCRIPT)
    assert layout["wide"] == [], f"{name}: wider than the {layout['width']} px page"
    assert layout["scrollWidth"] <= layout["width"]
    assert layout["smallestCell"] is None or layout["smallestCell"] >= 12
    assert layout["images"] and all(layout["images"])


def pdf_words(path: Path) -> list[dict]:
    """Every word of the PDF with its page and height (pdftotext -bbox, points)."""
    pdftotext = require_tool("pdftotext", shutil.which("pdftotext"), "poppler-utils")
    xhtml = subprocess.run(
        [pdftotext, "-bbox", str(path), "-"], capture_output=True, text=True, check=True
    ).stdout
    words = []
    for page_number, page in enumerate(xhtml.split("<page ")[1:], start=1):
        for y_min, y_max, text in re.findall(
            r'<word xMin="[\d.]+" yMin="([\d.]+)" xMax="[\d.]+" yMax="([\d.]+)">([^<]*)</word>',
            page,
        ):
            words.append({"page": page_number, "height": float(y_max) - float(y_min), "text": text})
    return words


def image_pages(path: Path) -> list[int]:
    pdfimages = require_tool("pdfimages", shutil.which("pdfimages"), "poppler-utils")
    listing = subprocess.run(
        [pdfimages, "-list", str(path)], capture_output=True, text=True, check=True
    ).stdout
    return [int(line.split()[0]) for line in listing.splitlines()[2:] if line.split()]


def image_page_sets(path: Path) -> dict[str, set[int]]:
    """{image object: the pages it is drawn on}: a figure taller than a page is cut in two."""
    pdfimages = require_tool("pdfimages", shutil.which("pdfimages"), "poppler-utils")
    listing = subprocess.run(
        [pdfimages, "-list", str(path)], capture_output=True, text=True, check=True
    ).stdout
    drawn: dict[str, set[int]] = {}
    for line in listing.splitlines()[2:]:
        columns = line.split()
        if len(columns) > 11 and columns[2] == "image":  # not an image's soft mask (smask)
            drawn.setdefault(f"{columns[10]} {columns[11]}", set()).add(int(columns[0]))
    return drawn


def page_sizes(path: Path) -> set[tuple[float, float]]:
    pdfinfo = require_tool("pdfinfo", shutil.which("pdfinfo"), "poppler-utils")
    info = subprocess.run(
        [pdfinfo, "-f", "1", "-l", "9999", str(path)], capture_output=True, text=True, check=True
    ).stdout
    found = re.findall(r"Page +\d+ size: +([\d.]+) x ([\d.]+) pts", info)
    return {(round(float(w)), round(float(h))) for w, h in found}


@pytest.mark.parametrize("name", PAGES)
def test_the_pdf_keeps_its_text_size_and_figures_with_their_captions(pages, name, tmp_path):
    printed = pdf.html_to_pdf(pages[name], tmp_path / "report.pdf")
    assert page_sizes(printed) == {A4_LANDSCAPE_PT}
    words = pdf_words(printed)
    pages_count = max(word["page"] for word in words)
    smallest = min(word["height"] for word in words if word["text"].strip())
    assert smallest >= MIN_WORD_HEIGHT_PT, f"{name}: text shrunk to {smallest:.1f} pt"

    with_images = set(image_pages(printed))
    captions = {
        word["page"]
        for word, after in zip(words, words[1:], strict=False)
        if word["text"] == "Figure" and re.fullmatch(r"\d+\.", after["text"])
    }
    assert captions, f"{name}: no figure captions found"
    assert captions <= with_images, (
        f"{name}: captions without their figure on pages {sorted(captions - with_images)}"
    )
    blank = set(range(1, pages_count + 1)) - {word["page"] for word in words} - with_images
    assert not blank, f"{name}: blank pages {sorted(blank)}"
    split = {image: pages for image, pages in image_page_sets(printed).items() if len(pages) > 1}
    assert not split, f"{name}: figures cut across pages {sorted(split.values())}"


def test_a_printed_tables_caption_and_head_stay_with_its_first_row(tmp_path):
    """The campaign PDF's hosts table: its caption and header at the foot of one page, its
    only row on the next. 59 small tables after paragraphs of every length: each table's
    caption is on the page of its first row."""
    css = toolkit.template_environment().get_template("style.css.j2").render()
    tables = "\n".join(
        f"<p>Paragraph {n} {'filler text ' * (n % 7 * 9)}</p>"
        f'<div class="scroll"><table><caption>Table {n}. caption of table {n}.</caption>'
        "<thead><tr><th>Host</th><th>Value</th></tr></thead>"
        f"<tbody><tr><td>row{n}first</td><td>1</td></tr>"
        f"<tr><td>row{n}second</td><td>2</td></tr></tbody></table></div>"
        for n in range(1, 60)
    )
    page = tmp_path / "tables.html"
    page.write_text(f"<html><head><meta charset='utf-8'><style>{css}</style></head>"
                    f"<body>{tables}</body></html>")  # fmt: skip
    printed = pdf.html_to_pdf(page, tmp_path / "tables.pdf")
    pdftotext = require_tool("pdftotext", shutil.which("pdftotext"), "poppler-utils")
    text = subprocess.run(
        [pdftotext, str(printed), "-"], capture_output=True, text=True, check=True
    ).stdout
    pages = text.split("\f")
    assert len(pages) > 5  # tables at the foot of several pages

    def page_of(words: str) -> int:
        return next(index for index, words_on in enumerate(pages) if words in words_on)

    split = [n for n in range(1, 60) if page_of(f"Table {n}. caption") != page_of(f"row{n}first")]
    assert split == []
