"""The ``workbench`` command line: one command per workflow, each a thin call into an area.

May use: every area."""
