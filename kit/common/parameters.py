"""Notebook parameters: one name per concept, and the old names still accepted for a while, with a warning.

papermill injects the parameters it was given in a cell after the notebook's own
``parameters`` cell; a notebook's next cell calls :func:`accept_renamed` so that a
caller still passing ``mxnet_version`` (now ``release``) keeps working.
"""

import warnings

#: old parameter name -> the name every notebook uses now
RENAMED = {
    "mxnet_version": "release",  # the release this kernel runs
    "saved_versions": "saved_with",  # releases whose artifacts to check ("version" is only model/param version)
    "saved_version": "saved_with",
    "overwrite": "retrain",  # as the CLI's --retrain
}
#: per notebook, where an old name meant something the new name says better
RENAMED_IN = {
    "train": {"out_dir": "store"},  # the artifact store, as in reload.ipynb
    "reload": {"out_dir": "run_dir"},  # the run folder records go to
}


def accept_renamed(namespace, notebook):
    """Move every old parameter name found in ``namespace`` (a notebook's globals) to its new name.

    Returns the old names that were given; each one is announced with a DeprecationWarning.
    """
    mapping = dict(RENAMED, **RENAMED_IN.get(notebook, {}))
    given = [old for old in mapping if old in namespace]
    for old in given:
        new = mapping[old]
        warnings.warn(
            "notebook parameter %r is now %r; the old name will stop working" % (old, new),
            DeprecationWarning,
            stacklevel=2,
        )
        namespace[new] = namespace.pop(old)
    return given
