"""The course's formgrader service as its graders meet it: the formgrader, and no shell as the grader account.

The service is a Jupyter server run as the grader account, which owns the course: the masters, the configuration
(Python that every grading run executes) and the gradebook. Whoever in the formgrade group could open a terminal or
a kernel on it, or write a file through it, would act as that account. tools/hub.py's formgrader role loads this
module twice over:

- `FormgraderOnly`, the server's authorizer (`ServerApp.authorizer_class`): no terminal, no kernel, no session
  (which starts a kernel), no file written through the contents API, for anyone; the formgrader's own pages and
  API (release, collect, autograde, manual grading, feedback), which nbgrader serves outside the authorizer, work
  as before, and every grading step runs in the course's sandbox as the command line runs it;
- a server extension that sends `/lab`, `/tree` and `/notebooks` to `/formgrader`, as a page of its own: the
  instructors' course list opens `/services/<course>/lab?formgrader=true` in a new tab, where JupyterLab would
  frame the formgrader, which the hub's `frame-ancestors 'none'` leaves blank (JupyterLab is not loaded here).

Instructors who need the grader account's shell get it on the server, as root gives it (`sudo -iu grader-<course>`),
never through the hub.
"""

from __future__ import annotations

from jupyter_server.auth.authorizer import AllowAllAuthorizer
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web

# Resources of a Jupyter server that run code or change files as the account the server runs as.
REFUSED = {"terminals": {"read", "write", "execute"}, "kernels": {"read", "write", "execute"},
           "sessions": {"read", "write", "execute"}, "contents": {"write", "execute"},
           "kernelspecs": {"write", "execute"}, "nbconvert": {"write", "execute"}}
# Pages that would frame the formgrader, or open files in an editor.
TO_FORMGRADER = r"/(?:lab|tree|notebooks|edit)(?:/.*)?"


class FormgraderOnly(AllowAllAuthorizer):
    """Everything the formgrader needs; nothing that runs code or writes a file as the grader account."""

    def is_authorized(self, handler, user, action: str, resource: str) -> bool:
        if action in REFUSED.get(resource, ()):
            self.log.warning("formgrader service: refused %s on %s to %s (no shell or kernel as the grader account)",
                             action, resource, getattr(user, "username", user))
            return False
        return True


class ToFormgrader(JupyterHandler):
    """JupyterLab's and the file browser's pages, sent to the formgrader's own page."""

    @web.authenticated
    def get(self, *args) -> None:
        self.redirect(url_path_join(self.base_url, "formgrader"))


def _jupyter_server_extension_points():
    return [{"module": "formgrader_service"}]


def _load_jupyter_server_extension(serverapp) -> None:
    pattern = url_path_join(serverapp.web_app.settings["base_url"], TO_FORMGRADER)
    serverapp.web_app.add_handlers(".*$", [(pattern, ToFormgrader)])
