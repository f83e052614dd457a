"""The course's grading, one package: nbgrader's plugins, the sandbox and the class grader.

This folder is also where instructors run nbgrader: its two configuration files (nbgrader_config.py and
course_directory.py, read by traitlets, never imported) describe this course, while the code they load is
always this package's, wherever the course they describe lies (a scratch course in the tests, a copy on a
grading machine). `make` installs the package into the course's virtual environment. README.md in this
folder follows one submission through it and names the module for each step.

- grading_environment: every limit, what a grading kernel sees and what the tamper guard watches.
- nbgrader's plugins, one job each: intake (with handins), restore, guarded_execute (the kernel and its
  limits), verdict (what a check earns, the flags), withhold (hidden tests never shown), late_policy,
  export (one column per check); notebook, the one reader of nbgrader's cell records and hidden-test
  delimiters; cells, the flags and outputs they all read.
- sandboxed_kernel, cgroups, kernel_relay, kernel_startup: the kernel every submission runs in; preflight,
  which of their limits hold on a machine, for the account that grades.
- feedback_summary, feedback_math: the feedback pages.
- report (a package): the class report, `python -m autograder.report`, and the course's one CSV writer.
- grade_class, class_plan, grading_kit, cluster, grading_worker, record: the class grader on Dask (record is
  the one writer of the course's gradebook and autograded/ folder).
"""
