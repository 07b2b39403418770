"""Case builder: controlled edit operators on documents, counterfactual families and
their variants, and the service that saves recorded edits as documents and variants as cases.

May use: cases, corpus, policy, core. (Policy: the freshness rules that a suggestion of stale
evidence depends on.)"""
