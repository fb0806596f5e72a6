"""papermill's nbclient engine as the kit runs notebooks: each started cell told to the step's progress, the
executed copy written at most every :data:`SAVE_EVERY` seconds. Imported where a notebook runs (papermill is not
needed to plan a run)."""

from __future__ import annotations

from papermill.engines import NBClientEngine, papermill_engines

from kit.execute.progress import StepProgress

ENGINE = "mxcompat"


#: the least seconds between two writes of the executed copy while its cells run (papermill writes it, validated,
#: before and after every cell: a fifth of a quick step's wall). Its start, its end and a failure are always written.
SAVE_EVERY = 1.0


class ProgressEngine(NBClientEngine):
    """papermill's nbclient engine that also tells a :class:`~kit.execute.progress.StepProgress` each cell it
    starts, and writes the executed copy at most every :data:`SAVE_EVERY` seconds while cells run.

    papermill writes the copy when the notebook starts and when it ends (a failing cell, a dead kernel
    included) whatever this engine does; only a host process killed mid-notebook leaves a copy up to
    :data:`SAVE_EVERY` seconds behind, which ``--resume`` runs again anyway.
    """

    @classmethod
    def execute_managed_notebook(cls, nb_man, kernel_name, progress: StepProgress | None = None, **kwargs):
        save = nb_man.save
        nb_man.save = lambda **kw: _save_throttled(nb_man, save, **kw)
        try:
            return cls._execute_with_progress(nb_man, kernel_name, progress, **kwargs)
        finally:
            nb_man.save = save

    @classmethod
    def _execute_with_progress(cls, nb_man, kernel_name, progress, **kwargs):
        if progress is not None:
            total = len(nb_man.nb.cells)
            cell_start = nb_man.cell_start

            def started(cell, cell_index=None, **kw):
                progress.cell_started(cell_index or 0, total)
                return cell_start(cell, cell_index, **kw)

            nb_man.cell_start = started
            kwargs["stdout_file"] = progress
        return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)


def _save_throttled(nb_man, save, **kwargs):
    if (nb_man.now() - nb_man.last_save_time).total_seconds() >= SAVE_EVERY:
        save(**kwargs)


papermill_engines.register(ENGINE, ProgressEngine)
