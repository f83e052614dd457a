"""The class grader: a whole class autograded by nbgrader's own converter on a Dask cluster of any size. The plan
(which submissions need grading), the kit each worker is given, the worker's task, the cluster, and the client's
one writer of the gradebook. The command: `python -m autograder.classgrader ASSIGNMENT`."""
