"""Labels: the blind labeling queue with reservations, history and adjudication, and
agreement between annotators.

May use: cases, core, corpus."""
