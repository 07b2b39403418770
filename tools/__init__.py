"""Scripts that prepare outside data for the workbench's documented import formats."""
