"""Demo: the Brightwave demo data (documents, cases, labels, runs, policies, wording, traces,
audits and reviews) built by one fixtures builder that the tests use too.

May use: every area except cli."""
