"""Grade returned exercise notebooks: each submission runs in a sandbox, and the grader judges its answers.

    attnbook-grade returned/*.ipynb --csv gradebook.csv       # run every submission, judge its answers
    attnbook-grade returned/*.ipynb --jobs 4 --timeout 60    # 4 at a time, 60 s per cell
    attnbook-grade returned/*.ipynb --chapter 2               # all of them as chapter 2
    attnbook-grade --recorded my_chapter2.ipynb               # fast, untrusted: the check records in the file
    python -m attnbook.grade ...                              # the same

How a submission is graded (one module per step):

- `submission`: the file is read safely (a regular file only, at most 20 MB, JSON nesting bounded before
  parsing); its chapter is `--chapter`, else the notebook's `metadata.attnbook.chapter`, else recognised from
  its content; a fresh temporary folder gets a copy of it and the request (`protocol`), and is removed
  afterwards.
- `sandbox`: the runner starts in bubblewrap: no network, nothing of the machine visible but the system,
  Python and the package (read-only), a private home and /tmp, the submission's folder the only writable
  place, a minimal environment, limits on memory, processes, file size and CPU time; the whole process tree
  is killed at the end.
- `runner` (inside the sandbox): runs the code cells in order in an IPython shell, then loads the checkers
  afresh from the package's files and records each exercise's checks (`attnbook.exercises.replay.record_checks`):
  the learner's functions run on the checker's inputs, seeded per run, and what they return is sent back as
  plain data (numbers, strings, shapes, dtypes, `.npy` bytes; never pickle).
- back in the grader's process, which never imports or runs the learner's code, the same checkers run again
  on the same inputs and compare the recorded outputs with their own references
  (`attnbook.exercises.replay.judge`): the verdict, the points and the hint are the grader's.
- `gradebook`: one CSV row per submission, the file rewritten atomically as each one ends.

Limits: a cell that runs past `--timeout` (or kills the process) is dropped and the notebook runs again
without it (at most 3 runs); a check past `--timeout` gets 0; a submission past `--notebook-timeout` is
killed and what was not graded yet gets 0. Each such event is listed in the row's `problems`.

What the sandbox does not stop: a learner's cell can compute right answers with the package's own reference
functions (they are importable in the sandbox); that shows up only as best-effort evidence.
"""
__all__ = ["main", "grade_submission", "read_submission", "SubmissionGrade", "ExerciseGrade", "Unreadable"]


def __getattr__(name: str):
    """Imported on first use, so the in-sandbox runner (`python -m attnbook.grading.runner`) loads only what
    it needs (protocol), not the grader's side."""
    if name == "main":
        from .cli import main
        return main
    if name in __all__:
        from . import submission
        return getattr(submission, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
