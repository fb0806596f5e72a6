"""A real S3 protocol server for the benchmarks: moto in server mode on a loopback port, fake credentials."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(port: int | None = None, log: Path | None = None) -> tuple[subprocess.Popen, dict]:
    """Start the server (on ``port``, else a free one) and wait until it answers; the process and the
    environment (credentials, ``AWS_ENDPOINT_URL_S3``) that points boto3 at it."""
    port = port or free_port()
    out = open(log, "w") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(150):
        try:
            urllib.request.urlopen(endpoint, timeout=2)
            break
        except OSError as e:
            if getattr(e, "code", None):  # an HTTP error is an answer: the server is up
                break
            time.sleep(0.2)
    return proc, {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": endpoint,
    }
