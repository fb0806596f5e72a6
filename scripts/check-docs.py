#!/usr/bin/env python3
"""Check the docs against the code, without running any MXNet work.

- every ``mxcompat ...`` / ``.venv/bin/mxcompat ...`` line in a fenced code block parses against the real
  click CLI (command names, option names, option values and their types, arguments, required options);
- every ``mxcompat ...`` in inline code names real commands and real options of them;
- every ``make X`` (fenced or inline) names a target of the Makefile;
- every script a fenced ``python X.py`` line runs exists;
- every relative link or image opens in a clone (and its ``#anchor`` is a heading of the page it names);
- every repository path in inline code (``kit/...``, ``bench/results/...json``, ``tests/...``) exists, and
  every dotted ``kit.`` name in inline code is a module, or a name a module defines.

Usage: .venv/bin/python scripts/check-docs.py [FILE.md ...]
(default: README.md, CHANGELOG.md, docs/*.md, bench/README.md). Exit 0 when every check passes; 1 with one
line per problem (FILE:LINE: what); 2 when a named file does not exist.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import shlex
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DOCS = ("README.md", "CHANGELOG.md", "docs/*.md", "bench/README.md")
# Top-level folders of the repository whose paths, quoted in inline code, must exist.
TRACKED_DIRS = ("kit", "tests", "bench", "scripts", "notebooks", "docs", ".github", ".ci", "nightly")
SHELL_OPERATORS = {"|", "||", "&&", ";", "&", ";;"}
REDIRECTIONS = {">", ">>", "<", "2>", "2>>", "&>", ">&", "<<"}

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HTML_SRC = re.compile(r"<(?:img|a)\b[^>]*?\b(?:src|href)=\"([^\"]+)\"")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
MXCOMPAT_INLINE = re.compile(r"^(?:\.venv/bin/)?mxcompat(?:\s+(.*))?$")
MAKE_INLINE = re.compile(r"^make(?:\s+(.*))?$")
KIT_DOTTED = re.compile(r"^(kit(?:\.\w+)+)(?:\(.*\))?$")


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    commands: int = 0
    inline_commands: int = 0
    make_targets: int = 0
    links: int = 0
    paths: int = 0
    files: int = 0

    def fail(self, doc: Path, line: int, message: str) -> None:
        self.problems.append(f"{_rel(doc)}:{line}: {message}")

    def summary(self) -> str:
        return (
            f"check-docs: {self.files} files; {self.commands} mxcompat command lines parsed, "
            f"{self.inline_commands} inline mxcompat commands, {self.make_targets} make targets, "
            f"{self.links} links, {self.paths} paths and kit names in inline code: "
            + ("ok" if not self.problems else f"{len(self.problems)} problem(s)")
        )


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


# --- reading a Markdown page -------------------------------------------------------------------------------


@dataclass
class Page:
    path: Path
    fenced: list[tuple[int, str, str]]  # (line, language, logical line with continuations joined)
    prose: list[tuple[int, str]]  # (line, text) outside fences
    headings: list[str]


def read_page(path: Path) -> Page:
    fenced: list[tuple[int, str, str]] = []
    prose: list[tuple[int, str]] = []
    headings: list[str] = []
    fence = None
    language = ""
    pending: tuple[int, str] | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        opened = FENCE.match(line)
        if fence is None:
            if opened:
                fence, language = opened.group(1), opened.group(2).lower()
                continue
            prose.append((number, line))
            heading = HEADING.match(line)
            if heading:
                headings.append(heading.group(2))
            continue
        if opened and line.strip().startswith(fence[0] * len(fence)) and not opened.group(2):
            if pending:
                fenced.append((pending[0], language, pending[1]))
                pending = None
            fence = None
            continue
        text = line.rstrip()
        if pending:
            start, so_far = pending
            text = so_far + " " + text.lstrip()
        else:
            start = number
        if text.endswith("\\"):
            pending = (start, text[:-1].rstrip())
        else:
            pending = None
            fenced.append((start, language, text))
    if pending:
        fenced.append((pending[0], language, pending[1]))
    return Page(path, fenced, prose, headings)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup and punctuation out, lower case, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Page) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in page.headings:
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def inline_spans(text: str) -> list[str]:
    return [m.group(2).strip() for m in INLINE_CODE.finditer(text)]


def _without_inline_code(text: str) -> str:
    return INLINE_CODE.sub("", text)


# --- shell lines -------------------------------------------------------------------------------------------


def simple_commands(line: str) -> list[list[str]]:
    """The simple commands of one shell line (command substitutions included), each as its words.

    Comments, pipes, lists and redirections are taken apart as a shell would; a line that does not
    tokenize (an unbalanced quote) gives one command of the raw words, so that it fails loudly if it
    is an mxcompat line.
    """
    substitutions = re.findall(r"\$\(([^()]*)\)", line)
    line = re.sub(r"\$\(([^()]*)\)", "SUBSTITUTION", line)
    out: list[list[str]] = []
    for text in [line, *substitutions]:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens = list(lexer)
        except ValueError:
            out.append(text.split())
            continue
        words: list[str] = []
        redirect = False
        for token in tokens:
            if redirect:
                redirect = False
                continue
            if token in SHELL_OPERATORS:
                out.append(words)
                words = []
            elif token in REDIRECTIONS or re.fullmatch(r"\d?[<>]+&?", token):
                redirect = True
            else:
                words.append(token)
        out.append(words)
    return [words for words in out if words]


def _program(words: list[str]) -> tuple[str, list[str]]:
    """(the program's base name, its arguments), leading VAR=value assignments skipped."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if not words:
        return "", []
    return words[0].rsplit("/", 1)[-1], words[1:]


# --- the CLI ----------------------------------------------------------------------------------------------


def load_cli():
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from kit.cli import main

    return main


def _remaining(ctx) -> list[str]:
    """What a group's context left for its subcommand (click keeps the command name apart)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        protected = getattr(ctx, "_protected_args", None)
        if protected is None:
            protected = getattr(ctx, "protected_args", [])
    return [*protected, *ctx.args]


def parse_mxcompat(cli, args: list[str]) -> str | None:
    """None when ``mxcompat ARGS`` parses as the CLI would parse it; else click's message.

    Each level makes its click context for real (``resilient_parsing=False``): option names, values and
    their types, arguments and required options are checked; no command is invoked.
    """
    import click

    command, name, ctx = cli, "mxcompat", None
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            ctx = command.make_context(name, list(args), resilient_parsing=False)
            while isinstance(command, click.Group):
                rest = _remaining(ctx)
                if not rest:
                    break
                name, command, rest = command.resolve_command(ctx, rest)
                if command is None:
                    return f"no such command {name!r}"
                ctx = command.make_context(name, rest, parent=ctx, resilient_parsing=False)
    except click.exceptions.Exit:
        return None  # --help / --version
    except click.UsageError as e:
        if type(e).__name__ == "NoArgsIsHelpError":
            return None  # a group alone prints its help
        where = e.ctx.command_path if e.ctx is not None else "mxcompat"
        return f"{where}: {e.format_message()}"
    except click.ClickException as e:
        return e.format_message()
    return None


def check_inline_mxcompat(cli, words: list[str]) -> str | None:
    """For a command quoted in prose: the command path exists and every option named is one of it."""
    import click

    command, path = cli, "mxcompat"
    for i, word in enumerate(words):
        if word == "--":
            return None
        if isinstance(command, click.Group) and not word.startswith("-"):
            sub = command.get_command(click.Context(command), word)
            if sub is None:
                return f"{path}: no such command {word!r}"
            command, path = sub, f"{path} {word}"
            continue
        if word.startswith("-") and word not in ("-", "..."):
            flag = word.split("=", 1)[0]
            known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            known |= set(click.Context(command).help_option_names)
            if flag not in known:
                return f"{path}: no such option {flag}"
    return None


# --- the Makefile -------------------------------------------------------------------------------------------


def make_targets(makefile: Path) -> set[str]:
    targets = set()
    for line in makefile.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9_.][\w.\-]*(?:[ \t]+[A-Za-z0-9_.][\w.\-]*)*)[ \t]*:(?!=)", line)
        if m:
            targets.update(t for t in m.group(1).split() if not t.startswith("."))
    return targets


def _make_goals(args: list[str]) -> list[str]:
    goals = []
    skip = False
    for word in args:
        if skip:
            skip = False
        elif word in ("-C", "-f", "-j", "-o", "-W", "-I"):
            skip = True
        elif not word.startswith("-") and "=" not in word:
            goals.append(word)
    return goals


# --- names of files and modules -----------------------------------------------------------------------------


def _module_file(dotted: str) -> Path | None:
    base = REPO.joinpath(*dotted.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _defines(source: Path, name: str) -> bool:
    tree = ast.parse(source.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                    return True
    return False


def check_kit_name(dotted: str) -> str | None:
    """A ``kit.a.b`` name: a module, or one name defined in (or imported by) the longest module prefix."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        source = _module_file(".".join(parts[:n]))
        if source is None:
            continue
        rest = parts[n:]
        if not rest:
            return None
        if len(rest) == 1 and _defines(source, rest[0]):
            return None
        if len(rest) == 1 and source.name == "__init__.py" and _module_file(".".join(parts)) is not None:
            return None
        if len(rest) > 1:
            return f"{dotted}: no module {'.'.join(parts[: n + 1])}"
        return f"{dotted}: {rest[0]} is not defined in {_rel(source)}"
    return f"{dotted}: no such module"


def check_repo_path(text: str) -> str | None:
    """A repository path quoted in inline code exists (placeholders and globs are left alone)."""
    path = text.split("#", 1)[0].split("::", 1)[0].rstrip(":,.")
    if any(c in path for c in "<>*{}$ ") or path.startswith(("/", "~")) or re.search(r"[A-Z][A-Z_]{2,}", path):
        return None  # a placeholder (runs/<run-id>/, notebooks/NAME.ipynb), a glob, or outside the repository
    if path.split("/", 1)[0] not in TRACKED_DIRS or "/" not in path:
        return None
    if not (REPO / path).exists():
        return f"no such file or folder: {path}"
    return None


# --- the checks ------------------------------------------------------------------------------------------------


def check_page(page: Page, cli, targets: set[str], pages: dict[Path, Page], report: Report) -> None:
    doc = page.path
    for line, _language, text in page.fenced:
        for words in simple_commands(text):
            program, args = _program(words)
            if program == "mxcompat":
                report.commands += 1
                problem = parse_mxcompat(cli, args)
                if problem:
                    report.fail(doc, line, f"`{' '.join(words)}`: {problem}")
            elif program == "make":
                for goal in _make_goals(args):
                    report.make_targets += 1
                    if goal not in targets:
                        report.fail(doc, line, f"`make {goal}`: no such target in the Makefile")
            elif re.fullmatch(r"python[\d.]*", program) and args and args[0].endswith(".py"):
                if not (REPO / args[0]).is_file():
                    report.fail(doc, line, f"`{' '.join(words)}`: no such script {args[0]}")

    for line, text in page.prose:
        for span in inline_spans(text):
            span = span.strip()
            m = MXCOMPAT_INLINE.match(span)
            if m:
                report.inline_commands += 1
                try:
                    words = shlex.split(m.group(1) or "", comments=False)
                except ValueError:
                    words = (m.group(1) or "").split()
                problem = check_inline_mxcompat(cli, words)
                if problem:
                    report.fail(doc, line, f"`{span}`: {problem}")
                continue
            m = MAKE_INLINE.match(span)
            if m:
                try:
                    words = shlex.split(m.group(1) or "")
                except ValueError:
                    words = (m.group(1) or "").split()
                for goal in _make_goals(words):
                    report.make_targets += 1
                    if goal not in targets:
                        report.fail(doc, line, f"`make {goal}`: no such target in the Makefile")
                continue
            m = KIT_DOTTED.match(span)
            if m:
                report.paths += 1
                problem = check_kit_name(m.group(1))
                if problem:
                    report.fail(doc, line, problem)
                continue
            if "/" in span and " " not in span:
                report.paths += 1
                problem = check_repo_path(span)
                if problem:
                    report.fail(doc, line, problem)

        bare = _without_inline_code(text)
        found = [m.group(1) for m in LINK.finditer(bare)] + [m.group(1) for m in HTML_SRC.finditer(bare)]
        ref = REF_LINK.match(bare)
        if ref:
            found.append(ref.group(1))
        for target in found:
            report.links += 1
            problem = check_link(doc, page, target, pages)
            if problem:
                report.fail(doc, line, problem)


def check_link(doc: Path, page: Page, target: str, pages: dict[Path, Page]) -> str | None:
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
        return None  # https:, mailto:, ...
    file_part, _, anchor = target.partition("#")
    if not file_part:
        if anchor and anchor not in anchors(page):
            return f"link #{anchor}: no such heading in {_rel(doc)}"
        return None
    resolved = (doc.parent / file_part).resolve()
    if _inside(doc.resolve(), REPO) and not _inside(resolved, REPO):
        return f"link {target}: points outside the repository"
    if not resolved.exists():
        return f"link {target}: no such file"
    if anchor and resolved.suffix == ".md":
        other = pages.get(resolved) or read_page(resolved)
        if anchor not in anchors(other):
            return f"link {target}: no such heading in {_rel(resolved)}"
    return None


def default_docs() -> list[Path]:
    out: list[Path] = []
    for pattern in DEFAULT_DOCS:
        out.extend(sorted(REPO.glob(pattern)))
    return out


def check(paths: list[Path]) -> Report:
    report = Report()
    cli = load_cli()
    targets = make_targets(REPO / "Makefile")
    pages = {p.resolve(): read_page(p) for p in paths}
    report.files = len(pages)
    for page in pages.values():
        check_page(page, cli, targets, pages, report)
    return report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    paths = [Path(a) for a in argv] or default_docs()
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"check-docs: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    report = check(paths)
    for problem in report.problems:
        print(problem)
    print(report.summary())
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
