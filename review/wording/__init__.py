"""Wording: the refusal wording file and its lint, and wording as a signed policy (the
wording in force, proposals, sign-off, and the production check of what was said).

May use: policy, core."""
