"""Charts: pure functions from DataFrames to Altair charts (risk-coverage, sweep, costs, run
metrics, label pairs, wording violations).

A layer of its own under the areas that draw (traces, evaluation, thresholds, monthly, the
pages), so they build their charts from these pieces instead of drawing their own.

May use: policy, core."""
