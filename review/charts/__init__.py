"""Charts: pure functions from DataFrames to Altair charts (risk-coverage, sweep, costs, run
metrics, label pairs, wording violations).

May use: policy, core."""
