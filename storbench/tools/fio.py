"""fio: job files from Jinja templates, standalone runs per host, json+ parsing."""

from __future__ import annotations

from pathlib import Path

from storbench.tools.base import ToolAdapter

HOST_VARIABLE = "STORBENCH_HOST"


class FioAdapter(ToolAdapter):
    name = "fio"
    job_suffix = ".fio"
    default_template = "fio/job.fio.j2"

    def template_context(self, spec: dict) -> dict:
        from storbench.plan import normalized_options

        target = spec["target"]
        directory = target["path"]
        if target.get("per_host_subdir", True):
            # fio expands ${VAR} in job files; the runner sets it per host: hosts never share files
            directory = f"{directory.rstrip('/')}/${{{HOST_VARIABLE}}}"
        return {
            "experiment": spec["experiment"],
            "run_id": spec["run_id"],
            "target": target,
            "directory": directory,
            "options": normalized_options(spec["params"]),
            "point": spec["point"],
        }

    def command(self, job_path: str, output_path: str, host: str) -> list[str]:
        return [
            "env",
            f"{HOST_VARIABLE}={host}",
            "fio",
            "--output-format=json+",
            f"--output={output_path}",
            job_path,
        ]

    def version_command(self) -> list[str]:
        return ["fio", "--version"]

    def output_name(self, host: str) -> str:
        return f"{host}.json"

    def target_directory(self, target: dict, host: str) -> str:
        path = target["path"].rstrip("/")
        return f"{path}/{host}" if target.get("per_host_subdir", True) else path

    def parse(self, manifest: dict, raw_dir: Path, base: dict) -> list[dict]:
        from storbench.tools import fio_json

        outputs = []
        for host in manifest["hosts"]:
            path = raw_dir / host["output"]
            outputs.append((host["name"], path.read_bytes().decode("utf-8", errors="replace")))
        return fio_json.parse_outputs(outputs, base=base)


ADAPTER = FioAdapter()
