"""Evaluation: runs of a pipeline on the labeled cases (imported or executed here), their
decision metrics by group, and the bundled reference pipelines.

May use: builder, labels, charts, cases, corpus, wording, policy, core."""
