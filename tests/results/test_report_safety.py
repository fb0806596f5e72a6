"""What a run's reports and its webhook promise when their input is hostile or a write fails: a webhook that
redirects is never reported as posted and its URL (a token) is never printed; text from records (an operator
named ``<script>``) never becomes HTML in summary.md, the bug report body or summary.html; a report that fails
midway leaves the previous one whole; a run id that is not a plain name is refused."""

from __future__ import annotations

import errno
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from conftest import run_cli
from helpers import REPO

from kit.common import artifacts
from kit.common.errors import UsageError
from kit.common.record_schema import new_record
from kit.results import reports
from kit.results.records import classify
from kit.results.runs import Run

SECRETS = ("s3cr3tpath", "qu3rytoken", "an0thers3cret")
HOOK_PATH = f"/services/T000/{SECRETS[0]}?token={SECRETS[1]}"

IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(1)</script>"
LINK = "[click me](javascript:alert(1))"
ARGUMENT = f"Cannot find argument '{IMG}'"  # kept whole in the signature
OPERATOR = f"Operator `{SCRIPT}` is not registered"  # backticks: an operator named to close a code span


def _record(saved, model, api, loaded, verdict, error, remedy=None):
    rec = new_record(saved, model, api, loaded, f"/store/{saved}/{model}/{api}")
    rec.update(verdict=verdict, reason=error, error=error, remedy=remedy)
    return rec


def _fixed(name, code):
    return {
        "fixed": True,
        "name": name,
        "title": f"title {SCRIPT}",
        "verdict": "identical",
        "summary": {},
        "user_code": code,
    }


RECORDS = [
    _record("1.4.1", "mlp", "export", "2.0.0b1", "close", None),
    _record("1.4.1", "lenet", "export", "2.0.0b1", "load-error", f"MXNetError: {ARGUMENT}"),
    _record(
        "1.4.1",
        "lstm",
        "export",
        "2.0.0b1",
        "load-error",
        f"MXNetError: {OPERATOR}",
        _fixed(f"remedy{IMG}", f"print('```')  # {SCRIPT}"),
    ),
    _record(
        "1.4.1",
        "lenet",
        "save_parameters",
        "2.0.0b1",
        "load-error",
        f"a reason with {LINK} and {SCRIPT} in it",
        {"fixed": False, "name": None, "verdict": None, "tried": [], "why_none": f"none fits {IMG}"},
    ),
]


def _manifest(run_id="nightly", summary="ok", skipped=()):
    return {
        "run_id": run_id,
        "kit_version": "0.x",
        "request": {"save": ["1.4.1"], "load": ["2.0.0b1"], "models": [], "apis": [], "allow_list": None},
        "order": ["reload:2.0.0b1", "summary"],
        "steps": {"reload:2.0.0b1": {"status": "ok"}, "summary": {"status": summary}},
        "skipped": list(skipped),
        "exit_code": 1,
    }


def _run_folder(root: Path, records=RECORDS, run_id="nightly") -> Path:
    """A finished run folder as the matrix leaves it: records, run.json (reports not written yet)."""
    run_dir = root / run_id
    (run_dir / "records").mkdir(parents=True)
    for rec in records:
        cell = rec["saved_with"], rec["model"], rec["api"], rec["loaded_with"]
        (run_dir / "records" / artifacts.record_name(*cell)).write_text(json.dumps(rec))
    (run_dir / "run.json").write_text(json.dumps(_manifest(run_id)))
    (run_dir / "summary.md").write_text("# the summary\n")
    return run_dir


def _markdown_as_html(markdown: str) -> str:
    """Markdown rendered as summary.html renders the notebook's Markdown (nbconvert's mistune, raw HTML kept)."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(markdown)


def _assert_no_markup_from_records(html: str) -> None:
    """No tag, link or image that a record's text carried; the text itself still there, escaped."""
    assert "<img src=x" not in html and "<script>alert" not in html and 'href="javascript' not in html
    assert re.search(r"<[^>]*onerror", html) is None  # nbconvert rewrites an <img>'s attributes: none has one
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# 1. the webhook: a redirect is not a delivery, and the URL is never printed


class _Hook(http.server.BaseHTTPRequestHandler):
    """POST to the hook's path answers ``status`` (a redirect: to a GET-only endpoint); GET is recorded."""

    posts: list = []
    gets: list = []
    status = 200

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).posts.append((self.path, json.loads(body)))
        self.send_response(type(self).status)
        if 300 <= type(self).status < 400:
            self.send_header("Location", f"/get-only/{SECRETS[2]}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):  # noqa: N802
        type(self).gets.append(self.path)  # a redirected POST arrives here, as a GET without its body
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hook():
    _Hook.posts, _Hook.gets, _Hook.status = [], [], 200
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", _Hook
    server.shutdown()
    server.server_close()


def _report(tmp_path, *args):
    proc = run_cli("report", "nightly", *args, "--runs-dir", str(tmp_path / "runs"), home=tmp_path / "h", timeout=120)
    return proc, proc.stdout + proc.stderr


def _assert_no_secret(output: str) -> None:
    assert not [s for s in SECRETS if s in output], output


@pytest.mark.parametrize("code", [301, 302, 307, 308])
def test_a_webhook_that_redirects_is_refused_never_reported_as_posted(tmp_path, hook, code):
    _run_folder(tmp_path / "runs")
    base, server = hook
    server.status = code
    proc, output = _report(tmp_path, "--webhook", base + HOOK_PATH)
    assert proc.returncode == 3, output
    assert "posted the summary" not in output
    assert f"the webhook {base}/... answered HTTP {code}" in proc.stderr
    assert f"a redirect to {base}/...: the summary was not posted" in proc.stderr
    assert server.gets == []  # urllib used to re-send the POST as a GET without its body, and report HTTP 200
    assert [path for path, _ in server.posts] == [HOOK_PATH]  # once: a redirect is an answer, not retried
    _assert_no_secret(output)


def test_the_webhook_url_is_shown_only_as_scheme_and_host(tmp_path, hook):
    _run_folder(tmp_path / "runs")
    base, server = hook
    proc, output = _report(tmp_path, "--webhook", base + HOOK_PATH)
    assert proc.returncode == 0, output
    assert proc.stdout == f"posted the summary of run nightly to {base}/... (HTTP 200)\n"
    [(path, payload)] = server.posts
    assert path == HOOK_PATH and payload["run_id"] == "nightly"
    _assert_no_secret(output)

    server.status = 403
    proc, output = _report(tmp_path, "--webhook", base + HOOK_PATH)
    assert proc.returncode == 3 and f"the webhook {base}/... refused the summary: HTTP 403" in proc.stderr
    _assert_no_secret(output)

    server.status, server.posts = 503, []
    proc, output = _report(tmp_path, "--webhook", base + HOOK_PATH)
    assert proc.returncode == 3 and f"the webhook {base}/... could not be reached after 3 attempts" in proc.stderr
    assert len(server.posts) == 3  # retried: at least once
    _assert_no_secret(output)

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    proc, output = _report(tmp_path, "--webhook", f"http://127.0.0.1:{closed}{HOOK_PATH}")
    assert proc.returncode == 3 and "could not be reached" in proc.stderr
    _assert_no_secret(output)

    for bad in (f"http://127.0.0.1:{SECRETS[1]}/{SECRETS[0]}", f"hooks.example.com/{SECRETS[0]}"):
        proc, output = _report(tmp_path, "--webhook", bad)
        assert proc.returncode == 2 and "--webhook" in proc.stderr, output
        _assert_no_secret(output)


# 2. text from records is escaped wherever it is rendered


def test_summary_md_and_the_issue_body_render_record_text_as_text(tmp_path):
    run_dir = _run_folder(tmp_path / "runs")
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest["skipped"] = [{"kind": "load", "name": "9.9.9", "reason": f"not built {IMG}"}]
    split = classify(RECORDS, [])
    reports.write_all(run_dir, RECORDS, split, manifest, reports.exit_code(manifest, split))
    html = _markdown_as_html((run_dir / "summary.md").read_text())
    _assert_no_markup_from_records(html)
    assert "<code>Operator `&lt;script&gt;alert(1)&lt;/script&gt;` is not registered</code>" in html
    assert "a reason with [click me](javascript:alert(1)) and &lt;script&gt;" in html  # readable, not a link
    assert "<span class=\"s1\">'```'</span>" in html and "# &lt;script&gt;alert(1)" in html  # the code, whole

    proc = run_cli("report", "nightly", "--issue", "--runs-dir", str(tmp_path / "runs"), home=tmp_path / "h")
    assert proc.returncode == 0, proc.stderr
    _assert_no_markup_from_records(_markdown_as_html(proc.stdout))


def test_summary_html_shows_record_text_escaped(tmp_path):
    """summary.ipynb executed on the host kernel and converted, as a run's summary step and reports do."""
    from kit.envs import kernelspecs
    from kit.execute.notebooks import NOTEBOOKS, run_notebook
    from kit.home import KitHome

    run_dir = _run_folder(tmp_path / "runs")
    home = KitHome(tmp_path / "home")
    kernelspecs.ensure_host_kernel(home)
    run_notebook(
        NOTEBOOKS / "summary.ipynb",
        run_dir / "summary.ipynb",
        kernelspecs.HOST_KERNEL,
        {"run_dir": str(run_dir)},
        home=home,
    )
    manifest = json.loads((run_dir / "run.json").read_text())
    split = classify(RECORDS, [])
    reports.write_all(run_dir, RECORDS, split, manifest, reports.exit_code(manifest, split))
    html = (run_dir / "summary.html").read_text()
    _assert_no_markup_from_records(html)
    assert "Operator `&lt;script&gt;alert(1)&lt;/script&gt;` is not registered" in html  # in the headline
    assert "remedy&lt;img src=x onerror=alert(1)&gt;" in html  # the remedy's name, in the remedies section


# 3. a report is replaced whole or not at all


def _previous_reports(run_dir: Path) -> dict:
    previous = {}
    for name in ("records.csv", "junit.xml", "summary.md", "summary.html"):
        previous[name] = f"the previous {name}\n"
        (run_dir / name).write_text(previous[name])
    return previous


def _assert_untouched(run_dir: Path, previous: dict) -> None:
    assert {name: (run_dir / name).read_text() for name in previous} == previous
    assert sorted(p.name for p in run_dir.iterdir() if p.is_file()) == sorted([*previous, "run.json"])


def _half_then_disk_full(part):
    def write(self, file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)):  # the old code: the report itself, opened for writing
            with open(file, "wb") as f:
                f.write(part)
        else:
            file.write(part if "b" in getattr(file, "mode", "b") else part.decode())
        raise OSError(errno.ENOSPC, "No space left on device")

    return write


def test_a_csv_or_junit_write_that_fails_midway_leaves_the_previous_report(tmp_path, monkeypatch):
    import csv

    run_dir = _run_folder(tmp_path / "runs")
    (run_dir / "summary.md").unlink()
    (run_dir / "records").rename(tmp_path / "records")
    previous = _previous_reports(run_dir)
    rows = reports.flat_rows(run_dir, RECORDS, set())

    def half_rows(self, rows):
        self.writerow(rows[0])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(csv.DictWriter, "writerows", half_rows)
    with pytest.raises(OSError, match="No space left"):
        reports.write_csv(run_dir / "records.csv", rows)
    monkeypatch.setattr(ET.ElementTree, "write", _half_then_disk_full(b"<?xml version='1.0'?><testsuites"))
    with pytest.raises(OSError, match="No space left"):
        reports.write_junit(run_dir / "junit.xml", rows, RECORDS, _manifest())
    _assert_untouched(run_dir, previous)
    monkeypatch.undo()
    reports.write_csv(run_dir / "records.csv", rows)  # and a write that succeeds replaces it whole
    assert (run_dir / "records.csv").read_text().splitlines()[0].startswith("saved_with,model,api,loaded_with,")


FULL_DISK = """
import json, resource, signal, sys
from pathlib import Path
import nbformat
from nbformat.v4 import new_markdown_cell, new_notebook
from kit.results import reports, summary_html
from kit.results.records import classify
from test_report_safety import RECORDS, _manifest

run_dir = Path(sys.argv[1])
nb = run_dir.parent / "source.ipynb"
nbformat.write(new_notebook(cells=[new_markdown_cell("# a summary")]), nb)
manifest = _manifest(skipped=[{"kind": "load", "name": f"9.9.{i}", "reason": "x" * 400} for i in range(20)])
split = classify(RECORDS, [])
rows = reports.flat_rows(run_dir, RECORDS, set())
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG) instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
failed = []
for name, write in (
    ("records.csv", lambda: reports.write_csv(run_dir / "records.csv", rows * 20)),
    ("junit.xml", lambda: reports.write_junit(run_dir / "junit.xml", rows * 20, RECORDS * 20, manifest)),
    ("summary.md", lambda: reports.write_markdown(run_dir / "summary.md", rows, split, manifest, 1, RECORDS)),
    ("summary.html", lambda: summary_html.write_html(nb, run_dir / "summary.html")),
):
    try:
        write()
    except OSError as e:
        failed.append((name, e.errno))
print(json.dumps(failed))
"""


def test_a_report_write_that_runs_out_of_disk_leaves_the_previous_report(tmp_path):
    """Each report written past a file size limit (a full disk, as the writer sees it) fails and leaves the
    previous file as it was, with no temporary file beside it."""
    run_dir = _run_folder(tmp_path / "runs")
    (run_dir / "summary.md").unlink()
    (run_dir / "records").rename(tmp_path / "records")
    previous = _previous_reports(run_dir)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), str(REPO / "tests"), str(REPO)]))
    proc = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(run_dir)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == [[n, errno.EFBIG] for n in previous]
    _assert_untouched(run_dir, previous)


# 4. run ids are plain names


BAD_IDS = ["x;touch pwned", "x`id`", "x\ny", "nightly\n", "..", "/abs", "a/b", ".hidden", "-rf", ""]


@pytest.mark.parametrize("run_id", BAD_IDS)
def test_a_run_id_that_is_not_a_plain_name_is_refused(tmp_path, run_id):
    with pytest.raises(UsageError) as refused:
        Run(tmp_path, run_id)
    assert refused.value.exit_code == 2 and refused.value.message == f"invalid run id {run_id!r}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("run_id", ["20261203-020000", "nightly-20261204", "latest", "rc1.9.1+cu112", "bisect-x_y"])
def test_plain_run_ids_are_taken(tmp_path, run_id):
    assert Run(tmp_path, run_id).dir == tmp_path / run_id


@pytest.mark.parametrize(
    "args",
    [
        ["report", "x;touch pwned"],
        ["report", "nightly\n", "--issue"],
        ["compare", "nightly", "x`id`"],
        ["bundle", "..", "--cell", "mlp/export/1.4.1/2.0.0b1"],
        ["investigate", "/abs", "--cell", "mlp/export/1.4.1/2.0.0b1"],
        ["run", "--resume", "x\ny"],
    ],
)
def test_every_command_that_takes_a_run_id_refuses_one_that_is_not_a_plain_name(tmp_path, args):
    _run_folder(tmp_path / "runs")
    bad = next(a for a in args[1:] if a not in ("nightly", "--resume"))
    proc = run_cli(*args, "--runs-dir", str(tmp_path / "runs"), home=tmp_path / "h", timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"error: invalid run id {bad!r}" in proc.stderr
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["nightly"]
