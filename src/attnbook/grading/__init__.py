"""Grade returned exercise notebooks: each submission runs in a sandbox, and the grader judges its answers.

    attnbook-grade --csv gradebook.csv -- returned/*.ipynb       # run every submission, judge its answers
    attnbook-grade --jobs 4 --timeout 60 -- returned/*.ipynb    # 4 at a time, 60 s per cell
    attnbook-grade --chapter 2 -- returned/*.ipynb               # all of them as chapter 2
    attnbook-grade --recorded -- my_chapter2.ipynb               # fast, untrusted: the check records in the file
    attnbook-grade --csv g.csv --similarity -- returned/*.ipynb  # and the answers that are the same program
    attnbook-grade --shard 0/4 --csv book-0.csv -- returned/*.ipynb   # shard 0 of 4 of a course (`shards`)
    attnbook-grade merge book-0.csv book-1.csv book-2.csv book-3.csv -o gradebook.csv
    python -m attnbook.grade ...                                 # the same

(`--`: every word after it is a file, even one named like an option.)

How a submission is graded (one module per step):

- `submission`: the file is read safely (a regular file only, reached through no symbolic link, at most 20 MB,
  JSON nesting bounded before parsing); its chapter is `--chapter`, else the notebook's
  `metadata.attnbook.chapter`, else recognised from its content; a fresh temporary folder gets a copy of it and
  the request (`protocol`), and is removed afterwards.
- `sandbox`: the runner starts in bubblewrap: no network, nothing of the machine visible but the system,
  Python and the package (read-only), a private home and /tmp, the submission's folder the only writable
  place, a minimal environment, limits on memory, processes, file size and CPU time; the whole process tree
  is killed at the end.
- `runner` (inside the sandbox): runs the code cells in order in an IPython shell, then loads the checkers'
  modules afresh from the package's files and serves the grader's checks (`attnbook.exercises.remote.Server`).
- the checks run in the grader's process, which never imports or runs the learner's code
  (`attnbook.exercises.remote.judge_exercise`): each time a checker calls the learner's function, its inputs
  (seeded per run) go to the runner over a pipe as plain data, the function runs there, and what it returned
  comes back as plain data (numbers, strings, shapes, dtypes, `.npy` bytes read from tensor storage; never
  pickle). The references, the comparison, the verdict, the points and the hint exist only in the grader: the
  learner's process never holds an expected value it could copy. The run's seed stays in the grader.
- `gradebook`: one CSV row per path given, the file rewritten atomically as each one ends; every cell and every
  printed line escaped, so that a file name or a message can neither be a formula nor forge a line.
- `shards` (`--shard I/N`, `merge`): a course graded as N batch jobs, each its share of the whole list (by SHA-256
  of each path as given) with a manifest beside its gradebook; the merge is exactly one run's gradebook, or an
  error naming the missing or repeated shard or submission.
- `similarity` (`--similarity`): the answers that are the same program after normalisation, read statically.

Limits: a cell that runs past `--timeout` (or kills the process) is dropped and the notebook runs again
without it (at most 3 runs); a check past `--timeout` gets 0; a submission past `--notebook-timeout` is
killed and what was not graded yet gets 0. Each such event is listed in the row's `problems`.

What it does not stop: the learner's code can compute right answers with the package's own reference functions
(they are importable in the sandbox). Passing one as the answer, calling it, or copying it is refused, but
those checks run in the learner's process (where its code could disable them), so they are best-effort
evidence; the values decide.
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
