"""Case builder: controlled edit operators on documents, counterfactual families and
their variants, and the service that saves recorded edits as documents and variants as cases.

May use: cases, corpus, core."""
