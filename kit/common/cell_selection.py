"""``--cells``: the (model, API) pairs a run checks, as ``MODEL:API`` patterns.

Each side of the colon is an fnmatch glob (``lenet:*``, ``*:export``, ``resnet*_v1:save_parameters``);
a model group's name (``core``, ``vision``, ...) on the left stands for each of its models.
Both the host and the kernels match with :func:`matches`, so a pattern means the same on each side.
"""

import fnmatch

from kit.common.capabilities import C_PREDICT_API, C_PREDICT_SOURCES, MODEL_GROUPS, split_pin


class CellPatternError(ValueError):
    """A ``--cells`` entry that is not ``MODEL:API``."""


def parse(patterns):
    """``[(model_glob, api_glob), ...]`` of ``patterns`` (a list, or one comma-separated string)."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",")]
    out = []
    for text in patterns or []:
        text = text.strip()
        if not text:
            continue
        model, sep, api = text.partition(":")
        if not sep or not model.strip() or not api.strip() or ":" in api:
            raise CellPatternError("%r is not MODEL:API (e.g. lenet:export, lenet:*, *:save_params)" % text)
        out.append((model.strip(), api.strip()))
    return out


def _model_matches(glob, model):
    name = split_pin(model)[0]
    return name in MODEL_GROUPS.get(glob, ()) or fnmatch.fnmatchcase(name, split_pin(glob)[0])


def matches(patterns, model, api):
    """Whether (``model``, ``api``) is a cell ``patterns`` asks for (no patterns: every cell is)."""
    parsed = parse(patterns)
    if not parsed:
        return True
    return any(_model_matches(m, model) and fnmatch.fnmatchcase(api, a) for m, a in parsed)


def expand(patterns, models, apis):
    """The cells ``patterns`` ask for among ``models`` x ``apis``, in that order, and the patterns that
    match none of them: ``([(model, api), ...], [unmatched pattern text, ...])``."""
    parsed = parse(patterns)
    cells = [(m, a) for m in models for a in apis if matches(patterns, m, a)]
    unmatched = [
        "%s:%s" % (mg, ag) for mg, ag in parsed if not any(matches(["%s:%s" % (mg, ag)], m, a) for m, a in cells)
    ]
    return cells, unmatched


def saved_for(cells):
    """The (model, API) artifacts the checks of ``cells`` read: each cell's own, and for a C predict cell
    its Module checkpoint (the files C++ predictors load), unless the model's export is saved anyway."""
    out = []
    for model, api in cells:
        if api != C_PREDICT_API:
            need = (model, api)
        elif any((model, source) in cells for source in C_PREDICT_SOURCES):
            continue
        else:
            need = (model, C_PREDICT_SOURCES[0])
        if need not in out:
            out.append(need)
    return out
