"""The parts of the Traces page (pages/traces_page.py, the one registered page): one trace
opened by a deep link, the filters and the paged list, the retention form, and the cached
look-ups of the filter pickers. Each module draws its part from the engine, the signed-in user
and the taxonomy it is given; what is not layout (tables, labels, deep-link parsing, the
filter) lives in review/traces (display, listing), where it is unit-tested."""
