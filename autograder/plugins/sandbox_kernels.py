"""The grading sandbox's kernel as nbclient asks for it: a kernelspec declared, not installed (SandboxKernelSpecs),
the courses its sandbox hides, and what a run without control groups is graded under (its condition)."""

from __future__ import annotations

import os

from jupyter_client.kernelspec import KernelSpecManager
from traitlets import Bool, List, Unicode

from autograder import grading_environment
from autograder.cells import course_directory
from autograder.sandbox import warm_kernels


def hidden_courses(preprocessor) -> list[str]:
    """The courses a grading kernel must not see: the one nbgrader is grading (its CourseDirectory; none when
    the executor runs on its own, as in the tests) and, on a class grader's worker, which grades a copy of
    it, the instructor's own (grading_environment.ORIGINAL_COURSE_VARIABLE)."""
    try:
        courses = [course_directory(preprocessor).root]
    except RuntimeError:
        courses = []
    original = grading_environment.handed_over(grading_environment.ORIGINAL_COURSE_VARIABLE)
    return [course for course in [*courses, original] if course]


class SandboxKernelSpecs(KernelSpecManager):
    """Jupyter's kernelspecs, plus the grading sandbox's (grading_environment.KERNELSPEC). That one is
    declared, not installed: its {resource_dir} is the package's sandbox/ folder, and the launcher is told the
    courses to hide (hidden_courses), so no kernelspec is written anywhere."""

    courses = List(Unicode(), help="the course folders the sandbox hides (none outside nbgrader)")
    warm = Bool(True, help="fork the kernel from this process's warm parent (warm_kernels.py)")
    warm_imports = List(Unicode(), help="what that warm parent has imported (grading_environment.warm_imports); "
                        "empty: grading_environment.WARM_IMPORTS")
    # Why a kernel meant to be warm starts cold (the warm parent could not start); None when none did.
    cold_because = Unicode(None, allow_none=True)

    def get_kernel_spec(self, kernel_name):
        if kernel_name == grading_environment.KERNEL_NAME:
            spec = dict(grading_environment.KERNELSPEC)
            spec["argv"] = [*spec["argv"], os.pathsep.join(self.courses)]
            # The launcher is a process of its own: it applies the limits this process applies, and ends the
            # sandbox when this process, its parent, dies.
            spec["env"] = {**grading_environment.limit_variables(),
                           grading_environment.GRADER_PID_VARIABLE: str(os.getpid())}
            if self.warm:
                parent, self.cold_because = warm_kernels.parent_socket(tuple(self.warm_imports))
                if parent:
                    spec["env"][grading_environment.WARM_PARENT_VARIABLE] = parent
            launcher = grading_environment.PACKAGE / "sandbox"          # the kernelspec's {resource_dir}
            return self.kernel_spec_class(resource_dir=str(launcher), name=kernel_name, **spec)
        return super().get_kernel_spec(kernel_name)


# The run's condition where the grading account can create no control group (python -m autograder.sandbox.preflight).
PER_PROCESS_ONLY = ("limits per process only: this account can create no control group, so memory and processes "
                    "were limited per process (python -m autograder.sandbox.preflight says why)")


# The same as root (a container with a read-only /sys/fs/cgroup): RLIMIT_NPROC does not bind root, so nothing
# limited the processes (a hand-in started 600 against a limit of 256).
ROOT_WITHOUT_CGROUP = ("limits per process only, and processes not limited at all: the grader runs as root, whom "
                       "RLIMIT_NPROC does not bind, and can create no control group (python -m autograder.sandbox.preflight "
                       "says why; grade as an ordinary account or give this one a control group)")


def per_process_condition() -> str:
    """What a run without control groups is graded under, as this account: root's processes are not limited."""
    return ROOT_WITHOUT_CGROUP if os.getuid() == 0 else PER_PROCESS_ONLY
