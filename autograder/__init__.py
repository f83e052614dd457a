"""The course's grading, one package, in folders that are its subsystems (README.md draws them):

- grading_environment (every limit, what a grading kernel sees, what the tamper guard watches) and limits
  (those limits as nbgrader settings); course (where a copy of the course keeps what nbgrader owns); bounded
  (reading what a student sent); notebook and cells (the one reader of nbgrader's cell records, the flags).
- sandbox/: the kernel every submission runs in (launcher, warm parents, start-up file, relay, seccomp, control
  groups) and the preflight, which of its limits hold on a machine for the account that grades.
- checker/: the hidden checks, in a process that never runs a line of the student's code.
- plugins/: nbgrader's plugins, one job each (intake, restore, guarded_execute, verdict, withhold, export,
  late_policy, the collectors).
- classgrader/: the class grader on Dask, `python -m autograder.classgrader` (record is the one writer of the
  course's gradebook and autograded/ folder).
- pages/: the feedback pages' summary and formulas, and every page made from a hand-in made safe.
- report/: the class report, `python -m autograder.report`, and the course's one CSV writer.

This folder is also where instructors run nbgrader: its two configuration files (nbgrader_config.py and
course_directory.py, read by traitlets, never imported) describe this course, while the code they load is
always this package's, wherever the course they describe lies (a scratch course in the tests, a copy on a
grading machine). `make` installs the package into the course's virtual environment.
"""
