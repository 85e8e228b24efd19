"""The scenarios of bench/bench.py, one module per measured concern; each suite is a function
of the number of runs that appends its rows and details to `common`'s report. The runner puts
the repository's tools/ folder on the path first (the harness package)."""
