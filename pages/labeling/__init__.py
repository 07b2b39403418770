"""The parts of the Label page (pages/labeling_page.py, the one registered page): the case and
its evidence (left: question, claims; right: the documents in their own scrolling box), the
label form with its keys, and the queue bar (filters, progress, keys overlay). What is not
layout (who may see the author's judgement, the queue, which decisions ask for reasons, the
key list) lives in review/labels, where it is unit-tested."""
