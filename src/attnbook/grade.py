"""`python -m attnbook.grade` and `attnbook.grade.main`: the grader, kept under its old name (see attnbook.grading)."""
import sys

from .grading.cli import main

if __name__ == "__main__":
    sys.exit(main())
