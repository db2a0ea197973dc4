"""The grader's limits and defaults, and its error for bad arguments."""
from __future__ import annotations

import re

FIXED_COLUMNS = ["submission", "sha256", "assignment", "status", "sandbox"]
TAIL_COLUMNS = ["total", "max_total"]
DEFAULT_TIMEOUT = 600
DEFAULT_CELL_TIMEOUT = 120
DEFAULT_MAX_OUTPUT = 200_000
MAX_RESTARTS = 3
MAX_SUBMISSION_BYTES = 50 * 2 ** 20
DATA_FILE_LIMIT = 20 * 2 ** 20
CHECK_CALL = re.compile(r"check\(\s*['\"](\d+\.\d+)['\"]")
NO_SANDBOX_WARNING = ("WARNING: grading WITHOUT a sandbox ({why}). A submission can read the "
                      "solutions and hidden tests, and change other students' files, grades "
                      "and feedback. Use it only for trusted notebooks; to sandbox, "
                      "install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`).")


class GradeError(ValueError):
    """A bad argument (missing path, empty folder, non-positive time limit, ...)."""


