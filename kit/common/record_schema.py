"""The record of one cell (an artifact saved with one release, loaded in another): its fields, in one place.

The kernel writes a record per cell; the host writes one when a kernel died on an
artifact; the reports read them. All of them start from :func:`new_record`.
"""

import time

from kit.common.versions import direction

SCHEMA = 1

#: what a remedy changes (a record's ``remedy.tried[*].changes``); a loading mode changes no file
LOADING_MODE, PARAMETER_MAPPING, GRAPH_EDIT, RESAVE = "loading mode", "parameter mapping", "graph edit", "re-save"
EXPORT_SETTING = "export setting"  # how an artifact is exported to another format (an ONNX opset)


def now():
    """The time stamp records carry (UTC, to the second)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def new_record(saved_with, model, api, loaded_with, artifact, archived=None):
    """A record with every field present and nothing known yet but the cell and its direction.

    ``archived``: the identity of a replaced artifact version (kept under ``.versions/``), None for the
    current artifact.
    """
    return {
        "schema": SCHEMA,
        "saved_with": saved_with,
        "model": model,
        "api": api,
        "loaded_with": loaded_with,
        "direction": direction(saved_with, loaded_with),
        "artifact": artifact,
        "archived": archived,
        "model_version": None,
        "param_version": None,
        "saved_fingerprint": None,  # the saving environment's, from the artifact's manifest
        "loaded_fingerprint": None,
        "verdict": None,
        "reason": None,
        "error_type": None,
        "error": None,
        "traceback": None,
        "load_seconds": None,
        "infer_seconds": None,
        "cases": {},
        "load_path": None,
        "load_attempts": [],
        "model_code_change": None,
        "network_only": None,
        "source_api": None,
        "remedy": None,
        "timed_out": None,  # seconds: the cell ran past --cell-timeout and its kernel was stopped
    }


def cell_id(rec):
    """``model/api/saved_with/loaded_with``: how a cell is named in reports and allow-lists; an archived
    version's saving release carries its identity, ``saved_with@<model_version>-<param_version>``."""
    saved = rec["saved_with"] + ("@" + rec["archived"] if rec.get("archived") else "")
    return "%s/%s/%s/%s" % (rec["model"], rec["api"], saved, rec["loaded_with"])


SUMMARY_FIELDS = ("max_abs", "max_rel", "ulp_max", "frac_out_of_tolerance", "top1_agreement", "cosine_min")


def flat_row(rec):
    """A record as one flat row: the cell, its verdict and reason, and the summary of its metrics."""
    row = dict((k, rec[k]) for k in ("saved_with", "model", "api", "loaded_with", "direction", "verdict"))
    row["reason"] = rec.get("reason")
    summary = rec.get("summary") or {}
    row.update((k, summary.get(k)) for k in SUMMARY_FIELDS)
    return row


def verdict_counts(records):
    """``{direction: {verdict: count}}``."""
    counts = {}
    for r in records:
        per = counts.setdefault(r["direction"], {})
        per[r["verdict"]] = per.get(r["verdict"], 0) + 1
    return counts
