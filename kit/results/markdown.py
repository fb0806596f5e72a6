"""Text from records (errors, signatures, operator, model and remedy names: what others' files spell) made
Markdown that reads as itself: never HTML, a link, an image or emphasis, in summary.md, the summary notebook,
summary.html and the bug report body."""

from __future__ import annotations

import re
from urllib.parse import quote

#: what makes Markdown of text: < ` * | ~ \ and entities, the "](" or "][" that closes a link ("[Errno 28]" stays)
_MD_SPECIAL = re.compile(r"[\\`*<|~]|\](?=[(\[])|&(?=#?\w+;)")


def md_text(text) -> str:
    """Text from a record for Markdown, outside code: read as itself (in a table cell too), never as HTML, a
    link, an image or emphasis; its lines joined. Underscores stay as they are (``_npi_add``)."""
    flat = " ".join(str("" if text is None else text).splitlines())
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), flat)


def md_code(text, table: bool = False) -> str:
    """Text from a record as a Markdown code span, shown verbatim; its backticks cannot close it early.
    ``table``: in a table row, where ``|`` would end the cell."""
    flat = " ".join(str("" if text is None else text).splitlines())
    flat = flat.replace("|", "\\|") if table else flat
    fence = "`" * (max((len(r) for r in re.findall("`+", flat)), default=0) + 1)
    pad = " " if len(fence) > 1 or flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}" if flat else ""


def md_fence(code: str, language: str = "") -> list[str]:
    """``code`` as a fenced block (lines), with a fence longer than any run of backticks in it."""
    fence = "`" * max(3, max((len(r) for r in re.findall("`+", code)), default=0) + 1)
    return [fence + language, code, fence]


def md_link(path: str) -> str:
    """A link to a file in the run folder: its name as text, its path quoted as the target."""
    return f"[{md_text(path)}]({quote(str(path), safe='/+')})"
