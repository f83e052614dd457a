"""Stands in for the course's reference module inside grading kernels (see sandboxed_kernel.py).

Graded work must be the student's own: importing the course's reference implementation would hand in
the answer. The grader flags the submission when it sees this error in any cell's output.
"""


class CourseRuleError(ImportError):
    pass


raise CourseRuleError(
    "course rule: graded work may not import the course's reference module gptcourse; "
    "write the part yourself (the assignment's locked cells give you everything else you need)"
)
