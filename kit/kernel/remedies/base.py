"""What every remedy is: the registry, the base class that declares what a remedy answers, and the private
copy of an artifact (:class:`Work`) an attempt changes. The remedies themselves are in the modules
:data:`kit.kernel.remedies.attempts.TRY_ORDER` names, in the order :mod:`~kit.kernel.remedies.attempts` tries them.
"""

import json
import os
import re
import shutil
import tempfile

from kit.common import verdicts
from kit.common.names import is_safe_relative
from kit.common.record_schema import EXPORT_SETTING, GRAPH_EDIT, LOADING_MODE, PARAMETER_MAPPING, RESAVE  # noqa: F401
from kit.common.versions import at_least, direction
from kit.kernel.mx import mxapi

#: every remedy, in the order they are tried
REMEDIES = []

#: the most edits one attempt chains before it gives up
MAX_CHAIN = 8


class Refused(Exception):
    """A remedy that looked at the artifact and will not apply: the message says why (recorded as tried)."""


def register(cls):
    """Class decorator: add ``cls`` (a :class:`Remedy`) to :data:`REMEDIES`."""
    REMEDIES.append(cls())
    return cls


def by_name(name):
    for remedy in REMEDIES:
        if remedy.name == name:
            return remedy
    raise KeyError("unknown remedy %r; known: %s" % (name, ", ".join(r.name for r in REMEDIES)))


class Target(object):
    """The cell a remedy is asked about: the loading and saving releases, the API, the direction."""

    def __init__(self, loaded, saved, api):
        self.loaded, self.saved, self.api = loaded, saved, api
        self.direction = direction(saved, loaded)


class Work(Target):
    """One attempt's view of the artifact: a private copy of its folder and manifest, the loading release."""

    def __init__(self, spec, adapter, loaded, saved, api, folder, manifest):
        Target.__init__(self, loaded, saved, api)
        self.spec, self.adapter = spec, adapter
        self.source = folder
        self.manifest = json.loads(json.dumps(manifest))
        for name in self.files():  # reload_run refuses such a manifest first; a copy never follows one out
            if name is not None and not is_safe_relative(name):
                raise ValueError("manifest refused: %r is not a plain relative name inside the artifact" % (name,))
        self.folder = tempfile.mkdtemp(prefix="mxcompat-remedy-")
        for name in self.files():  # what the loaders read; the reference and internals stay where they are
            if name and os.path.isfile(os.path.join(folder, name)):
                shutil.copy(os.path.join(folder, name), self.path(name))

    def files(self):
        """``(symbol file, params file)`` of a graph artifact (either may be None)."""
        info = self.manifest.get("load") or {}
        if "symbol_file" in info:
            return info.get("symbol_file"), info.get("param_file")
        if "prefix" in info:
            return "%s-symbol.json" % info["prefix"], "%s-%04d.params" % (info["prefix"], info["epoch"])
        return None, info.get("param_file")

    def path(self, name):
        return os.path.join(self.folder, name)

    def close(self):
        shutil.rmtree(self.folder, ignore_errors=True)


class Remedy(object):
    """Base: declares what failures it answers; ``apply`` changes the work copy, ``load`` loads it."""

    name = None
    #: a line a reader understands: what the remedy does
    title = None
    #: one of LOADING_MODE, PARAMETER_MAPPING, GRAPH_EDIT, RESAVE, EXPORT_SETTING
    changes = None
    #: "backward" / "forward": the directions it applies to
    directions = ("backward",)
    #: the APIs whose artifacts it applies to
    apis = ()
    #: the loading releases it applies to: (first, first not) or None for open ends
    loading = (None, None)
    #: a regular expression the error must match (None: any error, and an unsupported cell when ``unsupported``)
    error = None
    unsupported = False
    #: edits the artifact's files: may follow another edit in one attempt
    edits_artifact = False
    #: what a user writes to do the same (``{symbol}``, ``{params}``, ``{inputs}`` filled in)
    user_code = ""

    def matches(self, target, error_text, verdict):
        first, last = self.loading
        if first and not at_least(target.loaded, first):
            return False
        if last and at_least(target.loaded, last):
            return False
        if target.direction not in self.directions or target.api not in self.apis:
            return False
        if verdict == verdicts.UNSUPPORTED:
            return self.unsupported
        return self.error is None or re.search(self.error, error_text or "") is not None

    def apply(self, work, error_text):
        """Change the work copy (files, manifest); return what changed, in words. Raise :class:`Refused`."""
        return None

    def load(self, work):
        """The predictor of the work copy (default: the artifact's own load path)."""
        return work.adapter.load(work.spec, work.loaded, work.folder, work.manifest)

    def mode(self):
        """The context this remedy's artifact loads and runs in."""
        return mxapi.legacy_semantics() if self.changes == LOADING_MODE else _Nothing()

    def code(self, work):
        symbol, params = work.files()
        inputs = [i["name"] for i in work.manifest.get("inputs") or []]
        return self.user_code.strip().format(symbol=symbol or "model-symbol.json", params=params, inputs=inputs)


class _Nothing(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
