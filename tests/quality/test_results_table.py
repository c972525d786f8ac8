#!/usr/bin/env python3
"""The committed results (CTest quality.results_table): the tables of quality/README.md and
quality/results/dsa_table.md are what report.py makes from the committed JSON, and every table
the JSON gives is in the README. Exit 0 when they match, 1 otherwise."""
import sys

import report

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "--check"]
    sys.exit(report.main())
