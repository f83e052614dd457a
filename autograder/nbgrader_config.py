"""nbgrader configuration for the course. Run every nbgrader command from this folder (autograder/).

The instructor master of each assignment lives in ../solutions, the student release that
`nbgrader generate_assignment` produces in ../exercises. Everything nbgrader writes while grading
(submissions, autograded copies, feedback, the gradebook, the local exchange) goes under this folder
and is git-ignored. Where each of those lives: course_directory.py. The grading environment (the limits,
the sandbox's kernel, what it hides and what the tamper guard watches): grading_environment.py; the
grader page (book/grader.md) says what each limit guards against.

Loading this file changes nothing on disk or in the process's environment: it sets configuration, hands the
course's limits to the grading package of this process (grading_environment.use_limits), and checks, by
starting a trivial sandbox, that grading kernels can be sandboxed here.
"""

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)


def configure(c):
    from pathlib import Path

    from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
    from nbconvert.preprocessors.sanitize import SanitizeHTML
    from nbgrader.preprocessors import (
        AssignLatePenalties, ClearOutput, DeduplicateIds, GetGrades, IgnorePattern, LimitOutput,
        OverwriteCells, OverwriteKernelspec, SaveAutoGrades,
    )

    # The plugins are the grading package's (`autograder`, installed into the course's environment by
    # `make`), whichever copy of the course this file describes.
    from autograder.sandbox import sandboxed_kernel
    from autograder.plugins.guarded_execute import GuardedExecute
    from autograder.plugins.intake import BoundedNotebookExporter, Intake, bound_timestamp
    from autograder.plugins.restore import RestoreFromRelease
    from autograder.plugins.verdict import RecordFlags
    from autograder.plugins.withhold import HideHiddenTests
    from autograder.pages.feedback_page import FeedbackPage
    from autograder.pages.formulas import MATHML_TAGS, TypesetMath
    from autograder.pages.summary import FeedbackSummary
    from autograder.pages.allow_list import TAGS as SAFE_TAGS, allowed_attribute_mathml
    from autograder.pages.safe_markup import SafeMarkup
    from autograder.grading_environment import kernel_arguments, sandbox_enabled, use_limits, value
    from autograder.limits import Limits
    from autograder.plugins.late_policy import CourseLatePolicy
    from autograder.notebook import CheckCellMetadata        # nbgrader's, its schema compiled once per process

    HERE = Path(__file__).resolve().parent

    # The course id, nbgrader's folders, the gradebook's URL and the exchange: course_directory.py, which the
    # course's tools read as well (autograder.course.Course). The plugins read their folders from nbgrader's
    # CourseDirectory too.
    load_subconfig(str(HERE / "course_directory.py"))  # noqa: F821 (provided by traitlets)

    # `nbgrader collect` takes from the exchange only folders a student owns and the files they own, never through
    # a link: on a hub every student may write into the exchange's inbound (autograder/plugins/exchange_collect.py).
    c.ExchangeFactory.collect = "autograder.plugins.exchange_collect.OwnerCheckedCollect"

    # `nbgrader zip_collect NAME` takes Canvas's "Download Submissions" zip from autograder/downloaded/NAME/archive/
    # and finds each student by the roster (autograder/plugins/canvas_zip.py; another LMS: nbgrader's own plugins).
    c.ZipCollectApp.downloaded_directory = "autograder/downloaded"
    c.ZipCollectApp.extractor_plugin = "autograder.plugins.canvas_zip.CanvasExtractor"
    c.ZipCollectApp.collector_plugin = "autograder.plugins.canvas_zip.CanvasCollector"
    c.CanvasCollector.roster = str(HERE / "roster.csv")

    # The limits of one graded submission (autograder/limits.py, declared in grading_environment.py): each is a
    # setting, changed for the course at the end of this file, above the call of configure(), or for one run by
    # its variable (COURSE_GRADING_MEMORY_GB=8 in the shell). Applied in every process that loads this file.
    use_limits(Limits(config=c).configured())

    # A hanging cell must not stall a whole class (the notebook as a whole has its own limit too), nor a
    # kernel that is slow to start fail a student.
    c.Execute.timeout = int(value("COURSE_GRADING_CELL_TIMEOUT"))
    c.Execute.startup_timeout = int(value("COURSE_GRADING_KERNEL_STARTUP_TIMEOUT"))

    # Grading kernels run in a bubblewrap sandbox (see sandboxed_kernel.py): GuardedExecute starts the kernel
    # that grading_environment.py declares. COURSE_GRADING_SANDBOX=0 turns it off (then a kernel can read
    # and write whatever the grader's user can, and only the timeouts apply).
    c.GuardedExecute.sandbox = sandbox_enabled()
    if sandbox_enabled():
        problem = sandboxed_kernel.check()
        if problem:
            raise SystemExit(f"nbgrader_config.py: grading kernels run in a bubblewrap sandbox, and it cannot start "
                             f"here: {problem}. Refusing to grade unsandboxed; set COURSE_GRADING_SANDBOX=0 only on a "
                             "machine where you trust the code you grade.")

    # Seeds and the grading guard, applied in the kernel before the student's first cell (kernel_startup.py).
    c.Execute.extra_arguments = kernel_arguments()

    # Assignments whose checks run in the checker (autograder/checker/): a process beside the kernel that never
    # runs the student's code, reaching the student's names as values and handles. Every assignment, by a pattern,
    # so that one added later needs no line here (names or patterns; an assignment left out would run its test
    # cells in the student's kernel, under the guard only).
    c.GuardedExecute.checked = ["*"]

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
    # (CourseDirectory.release_directory) marks gets its metadata back and deleted test cells are put back
    # (nbgrader's OverwriteCells then restores their source, hidden tests included, from the master).
    c.Autograde.sanitize_preprocessors = [
        Intake, ClearOutput, DeduplicateIds, OverwriteKernelspec, RestoreFromRelease, OverwriteCells, CheckCellMetadata,
    ]
    # nbgrader reads timestamp.txt and the notebook before the first of them: both are bounded first (intake.py).
    c.Autograde.pre_convert_hook = bound_timestamp
    c.Autograde.exporter_class = BoundedNotebookExporter

    # Stock nbgrader scores a test cell 0 if it writes anything to stderr, which PyTorch warnings do.
    # Grades depend on exceptions only, so stderr output is dropped before grading.
    c.IgnorePattern.enabled = True
    c.IgnorePattern.pattern = r"[\s\S]*"

    # Once executed, the autograded notebook's markup is made safe for every page made from it (formgrader,
    # feedback, JupyterLab, nbconvert): markdown reduced to an allow-list (links http(s), mailto: and #
    # only; images only inline raster data), active outputs reduced to text (safe_markup.py). It leaves
    # error outputs and the release's own cells as they are, so it changes no score.
    # The gradebook's writers come last, reading the notebook as it is written to autograded/: the class
    # grader runs them on the client, over the notebooks its workers return (autograder/classgrader/record.py), so
    # `nbgrader autograde` and `python -m autograder.classgrader` write the gradebook with the same code.
    c.Autograde.autograde_preprocessors = [
        GuardedExecute, IgnorePattern, ClearMetadataPreprocessor, RecordFlags, LimitOutput, SafeMarkup,
        CheckCellMetadata, SaveAutoGrades, AssignLatePenalties,
    ]

    # Late submissions (late_policy.py, nbgrader's late-submission plugin): after 15 minutes' grace, 10 % of the
    # points earned off per started day past the assignment's due date, at most 50 %. Change the numbers
    # here; CourseLatePolicy.penalty_method = "zero" is nbgrader's stock rule (late scores zero).
    c.AssignLatePenalties.plugin_class = CourseLatePolicy
    c.CourseLatePolicy.grace_minutes = 15
    c.CourseLatePolicy.percent_per_day = 10
    c.CourseLatePolicy.max_percent = 50

    # Feedback shows each failed check's message, never the hidden test code (set enabled = False to
    # release the tests with the feedback after the due date). Scripts, event handlers and frames are removed
    # from outputs and markdown, since instructors open feedback pages too; formulas typeset are bounded
    # (TypesetMath's limits), the rest stay TeX.
    # Each feedback page opens with a summary: one line per check, a lost point's message, a link to the
    # cell and to the lesson section that teaches it (feedback_summary.py).
    # Formulas are typeset into MathML when the page is made (feedback_math.py): a page read offline, or in
    # JupyterLab's viewer that runs no script, shows them; the sanitizer keeps MathML and nothing else new.
    c.GenerateFeedback.preprocessors = [HideHiddenTests, GetGrades, FeedbackSummary, TypesetMath, SanitizeHTML,
                                        CSSHTMLHeaderPreprocessor]
    # nbconvert's HTML exporter without its second parse of every page (pages/feedback_page.py): the same page.
    c.GenerateFeedback.exporter_class = FeedbackPage
    c.HideHiddenTests.enabled = True
    c.SanitizeHTML.enabled = True               # nbconvert's preprocessors are off unless enabled
    # The course's allow-list (pages/allow_list.py, nh3's) and MathML, the tags SafeMarkup keeps after it:
    # nbconvert's SanitizeHTML (bleach's) escapes the rest; links and images are judged by their destination.
    c.SanitizeHTML.tags = sorted({*SAFE_TAGS, *MATHML_TAGS})
    c.SanitizeHTML.attributes = allowed_attribute_mathml
    c.HTMLExporter.sanitize_html = True
    # Every HTML page made with this configuration (the formgrader's view of a submission: its exporter is an
    # HTMLExporter with this configuration; feedback pages) is safe whatever nbgrader's templates do (its
    # formgrade and feedback templates render markdown cells without nbconvert's sanitizer, and nbconvert's
    # renderer allows every link scheme): SafeMarkup runs on the notebook before the template, so a notebook
    # graded before it existed is shown safely too, and the filters replace nbconvert's in whichever template
    # is used (markdown cleaned after rendering, an image's size a number). No template_name is set here:
    # generate_feedback would take it for its own.
    c.HTMLExporter.preprocessors = [SafeMarkup]
    c.HTMLExporter.filters = {"markdown2html": "autograder.pages.safe_markup.markdown2html",
                              "clean_html": "autograder.pages.allow_list.clean_html",
                              "get_metadata": "autograder.pages.safe_markup.get_metadata"}

    # `nbgrader export --exporter=autograder.plugins.export.PerCheckExport --to checks.csv`: one column per check (it
    # needs no settings: it reads the course's folders from the export command's CourseDirectory).


# The limits of one graded submission are settings (the grader page lists them with their defaults and reasons;
# autograder/limits.py). Change one for this course here, above the line that applies them, for example:
# c.Limits.memory_gb = 8

# traitlets logs an exception in a configuration file and goes on with the defaults, which would grade
# without the sandbox: any error here stops nbgrader instead.
try:
    configure(c)
except Exception as error:
    raise SystemExit(f"nbgrader_config.py failed, so nothing is graded: {type(error).__name__}: {error}") from error
