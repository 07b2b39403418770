"""Cases: evaluation cases in the canonical JSONL format (import, export, listing, edit, the one
writer of a new case), exchange formats for other evaluation tools, and train/validation/test
splits.

May use: core."""
