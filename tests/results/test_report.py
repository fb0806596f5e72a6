"""mxcompat report: a bug report body (--issue) and a JSON summary posted to a webhook on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import threading

import pytest
import yaml
from conftest import run_cli

from kit.common import artifacts
from kit.common.record_schema import new_record


def _record(saved, model, api, loaded, verdict, reason=None, error=None):
    rec = new_record(saved, model, api, loaded, f"/store/{saved}/{model}/{api}")
    rec.update(verdict=verdict, reason=reason, error=error)
    return rec


@pytest.fixture
def finished_run(tmp_path):
    """A finished run folder as the matrix leaves it: manifest, records, summary.md, an allow-list."""
    run_dir = tmp_path / "runs" / "nightly"
    (run_dir / "records").mkdir(parents=True)
    allow = tmp_path / "allow.yaml"
    allow.write_text(
        yaml.safe_dump(
            [
                {
                    "cell": "lstm/export/1.4.1/2.0.0b1",
                    "reason": "rnn_param (apache/mxnet#20000)",
                    "expires": "2026-01-31",
                },
                {"cell": "mlp/*/*/*", "reason": "never matches a failure", "expires": "2099-01-01"},
            ]
        )
    )
    records = [
        _record("1.4.1", "mlp", "export", "2.0.0b1", "close"),
        _record("1.4.1", "lstm", "export", "2.0.0b1", "infer-error", "MXNetError: ", "MXNetError: Shape inconsistent"),
        _record("1.4.1", "lenet", "save_params", "2.0.0b1", "unsupported", "loading release: removed in 2.0"),
        _record("2.0.0b1", "lenet", "export", "1.4.1", "load-error", "forward"),
    ]
    for rec in records:
        cell = rec["saved_with"], rec["model"], rec["api"], rec["loaded_with"]
        (run_dir / "records" / artifacts.record_name(*cell)).write_text(json.dumps(rec))
    manifest = {
        "run_id": "nightly",
        "kit_version": "0.x",
        "request": {"save": ["1.4.1"], "load": ["2.0.0b1"], "allow_list": str(allow)},
        "order": ["reload:2.0.0b1", "summary"],
        "steps": {"reload:2.0.0b1": {"status": "ok"}, "summary": {"status": "ok"}},
        "exit_code": 1,
    }
    (run_dir / "run.json").write_text(json.dumps(manifest))
    (run_dir / "summary.md").write_text("# the summary\n")
    return run_dir


def test_issue_body_has_the_table_the_failing_cells_with_errors_and_the_expired_entry(finished_run, tmp_path):
    proc = run_cli("report", "nightly", "--issue", "--runs-dir", str(tmp_path / "runs"), home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    body = proc.stdout
    assert body.startswith("### MXNet compatibility: regressions found (run `nightly`)")
    assert "| backward | close | 1 |" in body and "| backward | infer-error | 1 |" in body
    assert "| forward | load-error | 1 |" in body
    assert "#### Failing cells (1)" in body and "**`lstm/export/1.4.1/2.0.0b1`**: infer-error" in body
    assert "MXNetError: Shape inconsistent" in body
    assert "mxcompat bundle nightly --cell lstm/export/1.4.1/2.0.0b1" in body
    assert "allow-list entry `lstm/export/1.4.1/2.0.0b1` expired 2026-01-31 (rnn_param (apache/mxnet#20000))" in body
    assert "lenet" not in body.split("#### Failing cells")[1]  # unsupported and forward cells do not fail


class _Hook(http.server.BaseHTTPRequestHandler):
    received: list = []
    status = 200

    def do_POST(self):  # noqa: N802 - http.server's name
        length = int(self.headers["Content-Length"])
        type(self).received.append((self.headers["Content-Type"], json.loads(self.rfile.read(length))))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook():
    _Hook.received = []
    _Hook.status = 200
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)  # a slow request holds up no other
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", _Hook
    server.shutdown()


def test_the_webhook_gets_the_summary_as_json(finished_run, tmp_path, webhook):
    url, hook = webhook
    proc = run_cli("report", "nightly", "--webhook", url, "--runs-dir", str(tmp_path / "runs"), home=tmp_path / "h")
    assert proc.returncode == 0, proc.stderr
    assert f"posted the summary of run nightly to {url.rsplit('/', 1)[0]}/... (HTTP 200)" in proc.stdout
    assert proc.stdout.startswith("# the summary") is False  # --webhook alone prints only its line
    # a POST that times out on a loaded machine is sent again (at least once): every delivery is the same
    (content_type, payload), *again = hook.received
    assert all(delivery == (content_type, payload) for delivery in again)
    assert content_type == "application/json"
    assert payload["run_id"] == "nightly" and payload["exit_code"] == 1 and payload["outcome"] == "regressions found"
    assert payload["counts"] == {
        "backward": {"close": 1, "infer-error": 1, "unsupported": 1},
        "forward": {"load-error": 1},
    }
    assert payload["failures"] == [
        {"cell": "lstm/export/1.4.1/2.0.0b1", "verdict": "infer-error", "reason": "MXNetError: "}
    ]
    assert payload["expired_allowances"] == [
        {
            "cell": "lstm/export/1.4.1/2.0.0b1",
            "entry": "lstm/export/1.4.1/2.0.0b1",
            "expired": "2026-01-31",
            "reason": "rnn_param (apache/mxnet#20000)",
        }
    ]


def test_a_webhook_that_refuses_or_is_not_there_is_a_clear_error(finished_run, tmp_path, webhook):
    url, hook = webhook
    hook.status = 403
    proc = run_cli("report", "nightly", "--webhook", url, "--runs-dir", str(tmp_path / "runs"), home=tmp_path / "h")
    assert proc.returncode == 3 and "refused the summary: HTTP 403" in proc.stderr
    proc = run_cli(
        "report",
        "nightly",
        "--webhook",
        "http://127.0.0.1:9/x",
        "--runs-dir",
        str(tmp_path / "runs"),
        home=tmp_path / "h",
    )
    assert "could not be reached after 3 attempts" in proc.stderr
    proc = run_cli(
        "report", "nightly", "--webhook", "ftp://x", "--runs-dir", str(tmp_path / "runs"), home=tmp_path / "h"
    )
    assert proc.returncode == 2 and "needs an http(s):// URL" in proc.stderr


def test_report_of_a_missing_or_unfinished_run_is_a_usage_error(finished_run, tmp_path):
    proc = run_cli("report", "nope", "--runs-dir", str(tmp_path / "runs"), home=tmp_path / "h")
    assert proc.returncode == 2 and "no run nope" in proc.stderr
    manifest = json.loads((finished_run / "run.json").read_text())
    del manifest["exit_code"]
    (finished_run / "run.json").write_text(json.dumps(manifest))
    proc = run_cli("report", "nightly", "--runs-dir", str(tmp_path / "runs"), home=tmp_path / "h")
    assert proc.returncode == 2 and "has not finished" in proc.stderr and "--resume nightly" in proc.stderr
