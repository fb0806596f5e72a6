"""A finished run's outcome: `mxcompat report` (summary, bug report body, webhook) and `compare` (two runs)."""

from __future__ import annotations

import json
import sys

import click

from kit.cli.options import handle_errors, runs_dir_option


@click.command("report", short_help="A finished run's summary, bug report body or webhook post.")
@click.argument("run_id")
@click.option("--issue", is_flag=True, help="Print a Markdown body for a bug report (the default prints summary.md).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary JSON a --webhook would get.")
@click.option("--webhook", metavar="URL", help="POST the run's summary as JSON to URL (any HTTP endpoint).")
@runs_dir_option
@handle_errors
def report_cmd(run_id, issue, as_json, webhook, runs_dir):
    """A finished run's outcome: summary.md, a bug report body (--issue), or JSON to a webhook.

    Exits 0 once it has printed or posted (the run's own exit code is in the JSON and in
    run.json); 2 for a missing or unfinished run, 3 when the webhook refuses, redirects (not
    followed) or is unreachable. The webhook URL is shown only as scheme://host/... (it holds a token).

    \b
      mxcompat report 20261203-020000 --issue > body.md
      mxcompat report 20261203-020000 --webhook https://hooks.example.com/T000/B000
    """
    from kit.results import issue_report
    from kit.results.runs import Run, default_runs_dir

    run = Run(runs_dir or default_runs_dir(), run_id)
    if issue:
        click.echo(issue_report.issue_markdown(run), nl=False)
    if as_json:
        click.echo(json.dumps(issue_report.summary_payload(run), indent=1))
    if webhook:
        payload = issue_report.summary_payload(run)
        status = issue_report.post_webhook(webhook, payload)
        shown = issue_report.redact(webhook)  # the URL holds the hook's token: never printed whole
        click.echo(f"posted the summary of run {run_id} to {shown} (HTTP {status})", err=issue or as_json)
    if not (issue or as_json or webhook):
        issue_report.summary_payload(run)  # refuses a missing or unfinished run
        click.echo((run.dir / "summary.md").read_text(), nl=False)


@click.command("compare", short_help="Compare two finished runs by incompatibility signature.")
@click.argument("before")
@click.argument("after")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@runs_dir_option
@handle_errors
def compare_cmd(before, after, as_json, runs_dir):
    """Compare two finished runs by incompatibility signature (e.g. yesterday's nightly and today's).

    Lists the signatures that appeared in AFTER, disappeared from BEFORE, and those whose cells
    changed. Exit codes: 0 no new regression, 1 a new backward (or same-release) signature appeared
    that fails AFTER, 2 a run is missing or unfinished.

    \b
      mxcompat compare nightly-20261204 nightly-20261205
      mxcompat compare 20261204-020000 latest --json
    """
    from kit.results.compare import compare_runs, lines
    from kit.results.runs import Run, default_runs_dir

    root = runs_dir or default_runs_dir()
    result = compare_runs(Run(root, before), Run(root, after))
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=1))
    else:
        for text in lines(result):
            red = text.startswith("APPEARED (fails")
            click.secho(text, fg="red" if red else None)
    sys.exit(result.exit_code)
