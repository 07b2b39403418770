"""Charts: pure functions from DataFrames to Altair charts (risk-coverage, sweep, costs, run
metrics, question-family drift, label pairs, wording violations), the pieces every weekly
chart is built from, and the one chart style (colours per metric, % axes, empty panels).

A layer of its own under the areas that draw (traces, evaluation, thresholds, monthly, the
pages), so they build their charts from these pieces instead of drawing their own.

May use: policy, core."""
