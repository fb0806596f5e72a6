"""A run folder's layout that the host and the kernels share: its records folder and what lies in it.

A reload step's kernel writes one record per cell into ``<run_dir>/records/`` and names the artifact it
is working on in an in-flight marker there; the host reads both. The file names are
:func:`kit.common.artifacts.record_name` and :func:`kit.common.artifacts.inflight_name`.
"""

import os

from kit.common import artifacts

RECORDS = "records"


def records_dir(run_dir):
    """The folder of a run's records: ``<run_dir>/records``."""
    return os.path.join(str(run_dir), RECORDS)


def record_path(run_dir, saved, model, api, loaded, archived=None):
    """The record of one cell: ``<run_dir>/records/<saved>__<model>__<api>__<loaded>.json``."""
    return os.path.join(records_dir(run_dir), artifacts.record_name(saved, model, api, loaded, archived))


def inflight_path(run_dir, release, apis=None):
    """The in-flight marker of a reload kernel of ``release`` (``apis``: an ONNX step's is its own)."""
    return os.path.join(records_dir(run_dir), artifacts.inflight_name(release, apis))
