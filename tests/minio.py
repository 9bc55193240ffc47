"""A real MinIO server on loopback for the S3 tests (built by `make s3-server`)."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MINIO_BINARY = REPO / ".cache" / "bin" / "minio"
READY_TIMEOUT_S = 60.0
# The S3 target the adapters' render and command tests use (experiment "s3demo").
S3_DEMO_TARGET = {
    "name": "minio",
    "type": "s3",
    "endpoint": "http://127.0.0.1:9000",
    "region": "us-east-1",
    "bucket_prefix": "storbench",
    "bucket": "storbench-s3demo",
    "credentials": {"access_key_env": "S3_ACCESS_KEY", "secret_key_env": "S3_SECRET_KEY"},
}


class MinioUnavailable(RuntimeError):
    pass


@dataclass
class MinioServer:
    endpoint: str
    access_key: str
    secret_key: str
    process: subprocess.Popen
    log_path: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_minio(workdir: Path) -> MinioServer:
    binary = MINIO_BINARY if MINIO_BINARY.exists() else shutil.which("minio")
    if not binary:
        raise MinioUnavailable(f"no MinIO binary at {MINIO_BINARY}; run `make s3-server`")
    access_key = "sb" + secrets.token_hex(8)  # fresh per session: a leak test can grep for them
    secret_key = "sb" + secrets.token_hex(16)
    port, console_port = free_port(), free_port()
    env = {
        **os.environ,
        "MINIO_ROOT_USER": access_key,
        "MINIO_ROOT_PASSWORD": secret_key,
        "MINIO_UPDATE": "off",
        "MINIO_CALLHOME_ENABLE": "off",
        "MINIO_BROWSER": "off",
    }
    log_path = workdir / "minio.log"
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(binary), "server", str(data), "--address", f"127.0.0.1:{port}",
             "--console-address", f"127.0.0.1:{console_port}", "--quiet"],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    server = MinioServer(f"http://127.0.0.1:{port}", access_key, secret_key, process, log_path)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise MinioUnavailable(f"MinIO exited {process.returncode}: {log_path.read_text()}")
        try:
            with urllib.request.urlopen(f"{server.endpoint}/minio/health/ready", timeout=2):
                return server
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    server.stop()
    raise MinioUnavailable(f"MinIO not ready after {READY_TIMEOUT_S:.0f}s: {log_path.read_text()}")
