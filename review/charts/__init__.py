"""Charts: pure functions from DataFrames to Altair charts (risk-coverage, sweep, costs).

May use: policy, core."""
