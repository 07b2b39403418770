"""Policy: the no-answer policy file, the decision gate and the evidence gate (both fail closed
on a missing signal), selective-risk maths (what each threshold costs on both failure sides),
and policy versions with their hash-chained four-eyes sign-off.

May use: core."""
