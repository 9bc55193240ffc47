"""The benchmark run path imports nothing heavy: no pandas, pyarrow or matplotlib, nor the
config's and the job files' libraries (YAML, JSON schema, Jinja), whose steps come before it."""

import subprocess
import sys

HEAVY = ("pandas", "pyarrow", "matplotlib", "fabric", "paramiko", "yaml", "jsonschema", "jinja2")


def test_run_step_for_a_local_host_imports_nothing_heavy():
    probe = (
        "import sys\n"
        "from storbench import cli\n"
        "from storbench.run import engine\n"
        "from storbench.tools import get_tool\n"
        "get_tool('fio').command('/x/job.fio', '/x/out.json', 'localhost')\n"
        "from storbench.run import preflight\n"
        "from storbench.tools import known_tools\n"
        "adapters = [get_tool(name) for name in known_tools()]\n"
        "cli.build_parser()\n"
        "from storbench.config import search\n"
        "from storbench.plan import slo_search\n"
        "search.probe_budget(64, 12, 3)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_progress_lines_in_snakemakes_process_import_no_run_engine_and_no_host():
    # the logger plugin runs in every Snakemake process: a campaign's start, a dry run
    probe = (
        "import sys\n"
        "from storbench.run import live_progress, progress\n"
        "from storbench.plan.durations import hours_text, run_seconds\n"
        "print(hours_text(3725), hours_text(65), run_seconds({'runtime': '2m', 'ramp_time': 5}))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('storbench.run.engine',"
        " 'storbench.run.prepare', 'storbench.run.render', 'storbench.hosts', 'jinja2'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    durations, imported = result.stdout.splitlines()
    assert durations == "1h 02m 1m 05s 125.0"
    assert imported == "[]"
