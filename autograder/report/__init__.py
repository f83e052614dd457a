"""After grading: what the class got wrong, and grades an LMS accepts. One command per assignment:

    python -m autograder.report 01-layernorm                       # this checkout's course
    python -m autograder.report 01-layernorm --roster roster.csv   # and a Canvas gradebook import
    python -m autograder.report all --course /srv/course --out /srv/reports

writes into --out (by default the course's `_build/class-report/`, git-ignored), for each assignment:

- `NN-name-report.html`: one self-contained page (figures inline, nothing loaded from elsewhere): the score
  distribution; each graded cell's pass rate and item analysis (difficulty: the share who passed;
  discrimination: the point-biserial correlation of passing it with the rest of the score, flagged when near
  zero or negative); the mistakes the checks named, ranked by how many students made them, each with its
  students; the submissions the grader flagged and the students not graded; how long each notebook ran.
- `NN-name-checks.csv`: one row per graded student: the student id, one column per graded cell, the total.
- `NN-name-canvas.csv` (with --roster): a Canvas gradebook import: Canvas's columns Student, ID, SIS User
  ID, SIS Login ID and Section, then the assignment's column (--canvas-column; the assignment's name, which
  makes Canvas create the assignment, or "Name (canvas id)" of an existing one), with the "Points Possible"
  row second. The score is the gradebook's, less any late penalty.

Everything is read through nbgrader's API: the gradebook at the course's db_url (autograder/course_directory.py,
SQLite or PostgreSQL alike) for the scores, and the autograded notebooks for what each check said (the
error it raised, as the feedback shows it: autograder/pages/summary.py), the grader's flags (their
metadata, autograder/cells.py) and the cells' execution times (nbclient's timestamps in each
cell's metadata; kernel start-up and saving are not in them). A student missing from the roster or from
the gradebook is named in the report and on stderr, never dropped silently. Every text cell of the CSV files
is written so that a spreadsheet reads it as text, never as a formula (csv_files.spreadsheet_safe), and
everything a student wrote is escaped in the page (page.py's template escapes every value it is given).

The roster is a CSV file with the nbgrader id in a column `student_id` and Canvas's own columns (Student, ID,
SIS User ID, SIS Login ID, Section), as Canvas's gradebook export writes them: export the gradebook from
Canvas, add the `student_id` column, and pass the file.

One module per job: data (the gradebook and the autograded notebooks), analysis (item analysis, the
mistakes), csv_files (the per-check CSV, the Canvas import, the roster), figures, page (the HTML, from
templates/report.html.j2), assignment_report (one assignment's report and exports) and __main__ (the
command). Nothing here imports the course's tools: an instructor's machine needs the grading package alone.
"""
