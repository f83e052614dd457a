"""nbgrader's plugins for the course, one job a file: intake and restoring the release; the guarded execution that
runs a notebook in the sandbox (its kernelspec: sandbox_kernels) and its checks in the checker (checker_link); the
verdict; hidden tests withheld; the per-check export; the late policy; and the collectors (nbgrader's exchange, a
Canvas zip), with what of a hand-in is graded (handins)."""
