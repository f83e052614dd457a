"""nbgrader configuration for the course. Run every nbgrader command from this folder (autograder/).

The instructor master of each assignment lives in ../solutions, the student release that
`nbgrader generate_assignment` produces in ../exercises. Everything nbgrader writes while grading
(submissions, autograded copies, feedback, the gradebook, the local exchange) goes under this folder
and is git-ignored. The grading limits live in grading_limits.py; the grader page (book/grader.md)
says what each one guards against.
"""

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)


def configure(c):
    import importlib.util
    import json
    import os
    import sys
    import tempfile
    from pathlib import Path

    from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
    from nbconvert.preprocessors.sanitize import SanitizeHTML
    from nbgrader.preprocessors import (
        AssignLatePenalties, CheckCellMetadata, ClearOutput, DeduplicateIds, GetGrades, IgnorePattern, LimitOutput,
        OverwriteCells, OverwriteKernelspec, SaveAutoGrades,
    )

    HERE = Path(__file__).resolve().parent
    COURSE_ROOT = HERE.parent
    sys.path.insert(0, str(HERE))

    from course_grading import (
        GuardedExecute, HideHiddenTests, Intake, PerCheckExport, RecordFlags, RestoreFromRelease,
    )
    from grading_limits import sandbox_enabled, value

    # The course id, nbgrader's folders, the gradebook's URL and the exchange: course_directory.py, which the
    # course's tools read as well (tools.course.Course).
    load_subconfig(str(HERE / "course_directory.py"))  # noqa: F821 (provided by traitlets)

    # A hanging cell must not stall a whole class (the notebook as a whole has its own limit too).
    c.Execute.timeout = int(value("COURSE_GRADING_CELL_TIMEOUT"))
    # Starting a kernel imports torch in the sandbox; on a machine loaded by parallel grading that can take
    # well over nbclient's default of 60 s, and a kernel that is slow to start is not the student's fault.
    c.Execute.startup_timeout = 180

    # Grading kernels run in a bubblewrap sandbox (see sandboxed_kernel.py). COURSE_GRADING_SANDBOX=0 turns it
    # off (then a kernel can read and write whatever the grader's user can, and only the timeouts apply).
    if sandbox_enabled():
        import sandboxed_kernel

        problem = sandboxed_kernel.check()
        if problem:
            raise SystemExit(f"nbgrader_config.py: grading kernels run in a bubblewrap sandbox, and it cannot start "
                             f"here: {problem}. Refusing to grade unsandboxed; set COURSE_GRADING_SANDBOX=0 only on a "
                             "machine where you trust the code you grade.")
        spec = HERE / "kernels" / "course-sandbox"
        spec.mkdir(parents=True, exist_ok=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, str(HERE / "sandboxed_kernel.py"), "{connection_file}"],
            "display_name": "Python 3 (grading sandbox)", "language": "python",
            # bwrap does not pass SIGINT on to the kernel, so a timed-out cell is interrupted by a message.
            "interrupt_mode": "message",
        }))
        os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("JUPYTER_PATH")]))
        # Hidden from the kernel: this course and the checkout the course's code comes from (its .git, its
        # masters). The launcher hides homes, /run and /tmp as well.
        hidden = [str(COURSE_ROOT)]
        reference = importlib.util.find_spec("gptcourse")
        if reference is not None and reference.submodule_search_locations:
            hidden.append(str(Path(list(reference.submodule_search_locations)[0]).resolve().parent))
        os.environ["COURSE_GRADING_HIDDEN"] = os.pathsep.join(hidden)
        os.environ["COURSE_GRADING_READABLE"] = str(HERE / "kernel_startup.py")
        c.GuardedExecute.sandbox_kernel = "course-sandbox"
        # The sandbox has no network: nbgrader and the kernel talk over Unix sockets.
        c.KernelManager.transport = "ipc"
        c.KernelManager.ip = str(Path(tempfile.mkdtemp(prefix="course-grading-")) / "kernel")

    # Seeds and the grading guard, applied in the kernel before the student's first cell (kernel_startup.py).
    c.Execute.extra_arguments = [
        "--HistoryManager.hist_file=:memory:",
        f"--IPKernelApp.exec_files={[str(HERE / 'kernel_startup.py')]}",
    ]

    # Rules an assignment states; a forbidden function called from the student's code fails every check
    # that runs that code, and the submission is flagged. (Importing the course's reference module gptcourse
    # is refused in every assignment by the sandbox itself.)
    c.GuardedExecute.rules = {
        "01-layernorm": [{
            "functions": ["torch.nn.functional.layer_norm", "torch.layer_norm", "torch.native_layer_norm",
                          "torch.ops.aten.layer_norm", "torch.ops.aten.native_layer_norm"],
            "message": "assignment 1 asks you to write LayerNorm yourself, without F.layer_norm or nn.LayerNorm",
        }],
    }

    # Before grading: the intake checks (size, forged flags, malformed metadata), then every cell the release
    # marks gets its metadata back and deleted test cells are put back (nbgrader's OverwriteCells then
    # restores their source, hidden tests included, from the master).
    c.Intake.release_root = str(COURSE_ROOT / "exercises")
    c.RestoreFromRelease.release_root = str(COURSE_ROOT / "exercises")
    c.Autograde.sanitize_preprocessors = [
        Intake, ClearOutput, DeduplicateIds, OverwriteKernelspec, RestoreFromRelease, OverwriteCells, CheckCellMetadata,
    ]

    # Stock nbgrader scores a test cell 0 if it writes anything to stderr, which PyTorch warnings do.
    # Grades depend on exceptions only, so stderr output is dropped before grading.
    c.IgnorePattern.enabled = True
    c.IgnorePattern.pattern = r"[\s\S]*"

    c.Autograde.autograde_preprocessors = [
        GuardedExecute, IgnorePattern, ClearMetadataPreprocessor, RecordFlags, LimitOutput, SaveAutoGrades,
        AssignLatePenalties, CheckCellMetadata,
    ]

    # Feedback shows each failed check's message, never the hidden test code (set enabled = False to
    # release the tests with the feedback after the due date). Scripts, event handlers and frames are removed
    # from outputs and markdown, since instructors open feedback pages too.
    c.GenerateFeedback.preprocessors = [HideHiddenTests, GetGrades, SanitizeHTML, CSSHTMLHeaderPreprocessor]
    c.HideHiddenTests.enabled = True
    c.SanitizeHTML.enabled = True               # nbconvert's preprocessors are off unless enabled
    c.HTMLExporter.sanitize_html = True

    # `nbgrader export --exporter=course_grading.PerCheckExport --to checks.csv`: one column per check.
    c.PerCheckExport.autograded = str(HERE / "autograded")
    c.PerCheckExport.submitted = str(HERE / "submitted")


# traitlets logs an exception in a configuration file and goes on with the defaults, which would grade
# without the sandbox: any error here stops nbgrader instead.
try:
    configure(c)
except Exception as error:
    raise SystemExit(f"nbgrader_config.py failed, so nothing is graded: {type(error).__name__}: {error}") from error
