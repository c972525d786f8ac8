#!/usr/bin/env python3
"""The committed results (CTest quality.results_table): the tables and verdict words of
quality/README.md, of example 05's README and example 09's FP8 table are what report.py makes from the committed result
files (results/*.json; the cost table from results/raw/*.jsonl). Exit 0 when they match, 1
otherwise."""
import sys

import report

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "--check"]
    sys.exit(report.main())
