"""Remedies: the fixes a migrating user applies to an artifact that does not load, tried and measured.

Each remedy is registered once (``@register``) and declares which failures it applies to
(direction, API, loading releases, the error it answers), what it changes (a loading mode, a
parameter mapping, a graph edit, a re-save in another format) and the few lines of user code
that do the same. :func:`retry` runs every remedy that applies to a failed cell, in the loading
release's kernel, on the same reference cases with the same tolerance, and returns what each
did. A remedy informs: the cell's own verdict never changes.

Graph and file edits work on a copy of the artifact and may chain (a 2.0 export needs its
parameters re-saved, then an attribute dropped); a loading mode runs the unchanged files.
"""

import contextlib
import re
import traceback

from kit.common import verdicts
from kit.common.remedy_reasons import no_remedy_reason
from kit.kernel.remedies import conversion, export, export_ops, export_semantics, graph, params
from kit.kernel.remedies.base import MAX_CHAIN, REMEDIES, Refused, Target, Work, by_name

#: the remedy modules (each registers its remedies on import) in the order they are tried: graph edits and loading
#: modes first, then export settings and the operators an export needs rewritten, then file edits
TRY_ORDER = (
    graph.__name__,
    export.__name__,
    export_ops.__name__,
    export_semantics.__name__,
    conversion.__name__,
    params.__name__,
)
#: the verdicts of outputs that are wrong (a remedy's edit that made the file run may leave them)
WRONG_NUMBERS = (verdicts.DRIFT, verdicts.MISMATCH)


def in_order():
    """Every registered remedy, in the order they are tried."""
    return sorted(REMEDIES, key=lambda r: TRY_ORDER.index(type(r).__module__))


def applies(loaded, saved, api, rec):
    """Whether any remedy answers the failed (or unsupported) cell ``rec``."""
    error_text = rec.get("error") or rec.get("reason") or ""
    return any(r.matches(Target(loaded, saved, api), error_text, rec["verdict"]) for r in in_order())


def retry(spec, adapter, loaded, saved, api, folder, manifest, rec, measure):
    """Every remedy that applies to the failed cell ``rec``, tried and measured; the record's ``remedy``.

    ``measure(predictor)`` runs the reference cases and returns ``{"verdict", "reason", "summary"}``;
    it raises what inference raised. Returns ``{"fixed", "name", "verdict", ..., "tried": [...],
    "why_none"}`` (see :func:`_summarize`), also when no remedy applies.
    """
    error_text = rec.get("error") or rec.get("reason") or ""
    target = Target(loaded, saved, api)
    tried = [
        _attempt(remedy, spec, adapter, loaded, saved, api, folder, manifest, error_text, measure)
        for remedy in in_order()
        if remedy.matches(target, error_text, rec["verdict"])
    ]
    return _summarize(tried, error_text)


@contextlib.contextmanager
def remedied(name, spec, adapter, loaded, saved, api, folder, manifest, error_text, measure):
    """Remedy ``name`` tried as :func:`retry` tries it (with the edits it chains), its work copy kept open.

    Yields ``(attempt, work, mode)``: the attempt as recorded; ``work.folder`` and ``work.manifest``, the
    edited artifact (``work.net``, the loaded model of a parameter mapping); ``mode()``, the context to
    load and run it in (legacy semantics for that remedy, else nothing). The copy is removed on exit.
    """
    kept = []
    attempt = _attempt(by_name(name), spec, adapter, loaded, saved, api, folder, manifest, error_text, measure, kept)
    work = kept[0]
    try:
        yield attempt, work, by_name(name).mode
    finally:
        work.close()


def _attempt(first, spec, adapter, loaded, saved, api, folder, manifest, error_text, measure, keep=None):
    """``first`` applied to a copy of the artifact, then the edits its errors call for, until it loads and is
    measured or nothing more applies: the attempt as recorded. ``keep`` (a list) gets the copy, left open."""
    work = Work(spec, adapter, loaded, saved, api, folder, manifest)
    if keep is not None:
        keep.append(work)
    chain, changed, remedy, error, answered = [], [], first, error_text, set()
    measured, pending = None, []  # the last outputs, where wrong, and the edits still to try on them
    try:
        while True:
            chain.append(remedy)
            answered.add((remedy.name, _gist(error)))
            try:
                changed.append(remedy.apply(work, error))
                result = measure(first.load(work))  # edits chain only after an edit: they all load alike
            except Refused as e:
                if measured is not None:  # a follow-up with nothing to edit: the next, else the outputs as they were
                    chain.pop()
                    if pending:
                        remedy = pending.pop(0)
                        continue
                    return _record(chain, changed, work, measured["verdict"], result=measured)
                return _record(chain, changed, work, verdicts.LOAD_ERROR, refused=str(e))
            except Exception as e:  # noqa: BLE001 - the remedy's own failure is evidence, kept verbatim
                measured, pending = None, []
                error = "%s: %s" % (type(e).__name__, e)
                follow = [
                    r
                    for r in in_order()
                    if r.edits_artifact
                    and first.edits_artifact
                    and (r.name, _gist(error)) not in answered
                    and r.matches(work, error, None)
                ]
                if follow and len(chain) < MAX_CHAIN:
                    remedy = follow[0]
                    continue
                return _record(chain, changed, work, _failed_verdict(e), error=e, tb=traceback.format_exc())
            if result["verdict"] in WRONG_NUMBERS and first.edits_artifact and len(chain) < MAX_CHAIN:
                follow = [  # an edit that made the file run may leave numbers another edit answers
                    r
                    for r in in_order()
                    if r.edits_artifact and r not in chain and r.matches(work, result.get("reason"), result["verdict"])
                ]
                if follow:
                    measured, remedy, pending = result, follow[0], follow[1:]
                    error = result.get("reason") or result["verdict"]
                    continue
            return _record(chain, changed, work, result["verdict"], result=result)
    finally:
        if keep is None:
            work.close()


def _gist(error_text):
    """What an error says, without what wraps it: a remedy answers one such fact once per attempt."""
    for pattern in (r"Cannot find argument '[^']+'", r"Operator \S+ is not registered", r"Invalid NDArray file format"):
        m = re.search(pattern, error_text or "")
        if m:
            return m.group(0)
    return (error_text or "")[:200]


def _failed_verdict(exc):
    return getattr(exc, "verdict", verdicts.LOAD_ERROR)


def _record(chain, changed, work, verdict, result=None, refused=None, error=None, tb=None):
    unique = [r for i, r in enumerate(chain) if r not in chain[:i]]
    out = {
        "name": "+".join(r.name for r in unique),
        "remedies": [r.name for r in chain],
        "title": "; then ".join(r.title for r in unique),
        "changes": [r.changes for r in chain],
        "changed": [c for c in changed if c],
        "verdict": verdict,
        "reason": None,
        "summary": None,
        "user_code": "\n\n".join(r.code(work) for r in unique),
    }
    if result is not None:
        out.update(reason=result.get("reason"), summary=result.get("summary"))
    if refused is not None:
        out.update(verdict="refused", reason=refused)
    if error is not None:
        out.update(error_type=type(error).__name__, error=str(error).strip(), reason=verdicts.headline(error))
        if tb:
            out["traceback"] = "\n".join(tb.strip().splitlines()[-8:])
    return out


def _summarize(tried, error_text):
    fixed = [t for t in tried if t["verdict"] in verdicts.PASSING]
    best = fixed[0] if fixed else None
    out = {
        "fixed": bool(best),
        "name": best["name"] if best else None,
        "title": best["title"] if best else None,
        "verdict": best["verdict"] if best else None,
        "summary": best["summary"] if best else None,
        "changed": best["changed"] if best else [],
        "user_code": best["user_code"] if best else None,
        "alternatives": [t["name"] for t in fixed[1:]],
        "tried": tried,
        "why_none": None,
    }
    if not best:
        why = no_remedy_reason(error_text)
        if tried:
            last = tried[-1]
            said = last.get("error") or last.get("reason") or ""
            why = "tried %s: %s" % (
                ", ".join(t["name"] for t in tried),
                no_remedy_reason(said) or (last.get("reason") or said or last["verdict"]),
            )
        out["why_none"] = why or "no known remedy for this failure"
    return out
