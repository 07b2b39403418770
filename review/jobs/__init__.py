"""Jobs: background work (imports, syncs, pushes, rebuilds, exports, evaluation runs) as rows
of the database, run by ``workbench worker`` processes on any machine or in the page that
started it; see :mod:`review.jobs.queue`.

May use: every area except cli and demo."""
