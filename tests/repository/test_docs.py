"""The docs cannot rot: every command they show parses against the real CLI (scripts/check-docs.py), and the
README stays a page a newcomer reads in five minutes. No MXNet work runs here."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check-docs.py"
USER_DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.fixture(scope="module")
def check_docs():
    spec = importlib.util.spec_from_file_location("check_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_docs_check_passes_on_the_repository():
    done = run_script()
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert summary.endswith(": ok"), summary
    counts = dict((name, int(n)) for n, name in re.findall(r"(\d+) (files|mxcompat command lines|links)", summary))
    assert counts["files"] >= 14 and counts["mxcompat command lines"] >= 40 and counts["links"] >= 40, summary


def test_a_doc_with_a_wrong_option_fails(tmp_path):
    doc = tmp_path / "wrong.md"
    doc.write_text(
        "# A page\n\n```bash\n.venv/bin/mxcompat run --save 1.4.1,1.9.1 --no-such-option\n```\n", encoding="utf-8"
    )
    done = run_script(str(doc))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{doc}:4:" in done.stdout and "--no-such-option" in done.stdout, done.stdout


def test_a_named_file_that_does_not_exist_is_a_usage_error(tmp_path):
    done = run_script(str(tmp_path / "missing.md"))
    assert done.returncode == 2 and "no such file" in done.stderr


def test_what_a_shell_line_holds_is_checked_as_a_shell_reads_it(check_docs, tmp_path):
    """Continuations, comments, assignments, pipes and command substitutions: each mxcompat command is found."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A heading: with `code`\n", encoding="utf-8")
    doc = tmp_path / "good.md"
    doc.write_text(
        "# Good\n\n"
        "```bash\n"
        ".venv/bin/mxcompat run --save 1.4.1,1.9.1 \\\n"
        "    --load 1.9.1 --jobs 2   # a comment with --no-such-option\n"
        "MXCOMPAT_HOME=/tmp/h mxcompat env list | tee envs.txt\n"
        'eval "$(.venv/bin/mxcompat env jupyter-path --export)"\n'
        "mxcompat report RUN-ID --issue > body.md && mxcompat compare A B --json\n"
        "mxcompat --help\n"
        'make demo DEMO_RELEASES="1.2.1 1.9.1"\n'
        "```\n\n"
        "See [the other page](other.md#a-heading-with-code), [this one](#good), `make test-fast`,\n"
        "`mxcompat store ls --versions`, `kit/kernel/remedies/attempts.py` and `kit.store.load(...)`.\n",
        encoding="utf-8",
    )
    report = check_docs.check([doc])
    assert report.problems == []
    assert report.commands == 6
    assert report.inline_commands == 1
    assert report.make_targets == 2
    assert report.links == 2


def test_every_kind_of_rot_is_named(check_docs, tmp_path):
    doc = tmp_path / "rotten.md"
    doc.write_text(
        "# Rotten\n\n"
        "```bash\n"
        "mxcompat stroe ls\n"  # 4: no such command
        "mxcompat run --save 1.9.1 --jobs 99\n"  # 5: out of range
        "mxcompat run --save 1.9.1 --versions some\n"  # 6: not a choice
        "mxcompat run --save 1.9.1 --store\n"  # 7: an option without its value
        "mxcompat convert RUN\n"  # 8: a required option missing
        "mxcompat store push A B\n"  # 9: an extra argument
        "make no-such-target\n"  # 10
        ".venv/bin/python bench/no_such_bench.py\n"  # 11
        "```\n\n"
        "[gone](gone.md) [nowhere](#nowhere)\n"  # 14
        "`mxcompat run --no-such` `mxcompat stroe` `make nope`\n"  # 15
        "`kit/no_such_module.py` `kit.store.no_such_name` `kit.no_such.module`\n",  # 16
        encoding="utf-8",
    )
    problems = check_docs.check([doc]).problems
    lines = sorted(int(p.split(":")[1]) for p in problems)
    assert lines == [4, 5, 6, 7, 8, 9, 10, 11, 14, 14, 15, 15, 15, 16, 16, 16], "\n".join(problems)
    text = "\n".join(problems)
    for words in ("stroe", "99", "some", "--store", "--cell", "B", "no-such-target", "no_such_bench.py"):
        assert words in text, words


def test_the_readme_is_read_in_five_minutes():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for command in ("make demo", "make test"):  # .ci/run calls make test
        assert command in text
    for page in ("docs/glossary.md", "docs/architecture.md", "docs/reading-the-summary.md", "CHANGELOG.md"):
        assert f"]({page}" in text, page
    assert "Remedies" in text and "mxcompat convert" in text
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert images, "the README shows a summary"
    for image in images:
        assert (REPO / image).stat().st_size < 300_000, image


def test_every_docs_page_is_linked_from_the_readme():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    unlinked = [p.name for p in USER_DOCS[1:] if f"](docs/{p.name})" not in text]
    assert not unlinked, unlinked


def test_no_history_or_issue_numbers_in_the_user_docs():
    """What changed, and when, is CHANGELOG.md's; the user guide says what the kit is."""
    history = re.compile(r"\bissue \d+|\bthis round\b|\bearlier round\b|\blast round\b|(?<![\w&/])#\d+\b", re.I)
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in USER_DOCS
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if history.search(line)
    ]
    assert not found, "\n".join(found)


def test_every_figure_file_the_docs_name_is_committed():
    named = set()
    for path in [*USER_DOCS, REPO / "bench" / "README.md", REPO / "CHANGELOG.md"]:
        named |= set(re.findall(r"bench/results/[\w.-]+\.json", path.read_text(encoding="utf-8")))
    assert named, "the docs name the result files their figures come from"
    tracked = set(
        subprocess.run(
            ["git", "ls-files", "bench/results"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert named <= tracked, named - tracked


def test_no_doc_names_a_path_outside_the_clone():
    """Links outside the repository are the checker's; a bare ../shared path in the prose is this test's."""
    for path in [*USER_DOCS, REPO / "bench" / "README.md", REPO / "CHANGELOG.md"]:
        assert "../shared" not in path.read_text(encoding="utf-8"), path
