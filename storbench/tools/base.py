"""The interface every tool adapter implements: render, command, parse.

Adapters are imported on the run path, so they import nothing heavy at module level.
"""

from __future__ import annotations

from pathlib import Path


class ToolAdapter:
    name: str = ""
    job_suffix: str = ".job"
    default_template: str = ""  # relative to the workflow's templates/ folder

    def template_context(self, spec: dict) -> dict:
        """Variables a job template sees (see README: templates)."""
        raise NotImplementedError

    def command(self, job_path: str, output_path: str, host: str) -> list[str]:
        """argv that runs one job file on one host, writing the tool's result to output_path."""
        raise NotImplementedError

    def version_command(self) -> list[str]:
        raise NotImplementedError

    def output_name(self, host: str) -> str:
        """File name of a host's result inside the raw iteration folder."""
        raise NotImplementedError

    def target_directory(self, target: dict, host: str) -> str | None:
        """Directory the tool needs on the host before it starts (created by the runner)."""
        return None

    def parse(self, manifest: dict, raw_dir: Path, base: dict) -> list[dict]:
        """Rows in the result schema (per host and host='all') from one iteration's raw files."""
        raise NotImplementedError
