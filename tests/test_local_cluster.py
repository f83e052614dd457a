"""A local cluster's workers are forked from a fork server that outlives the run (autograder/classgrader/cluster.py): each
still starts with this process's environment, folder and umask as they are now, not as they were when the
server started, as a new process would."""

from __future__ import annotations

import os

from autograder.classgrader.cluster import cluster_client, current_umask


def process_state() -> dict:
    """What a worker's process has, read in the worker."""
    return {"environment": dict(os.environ), "folder": os.getcwd(), "umask": current_umask()}


def test_a_forked_worker_has_this_process_state_not_the_fork_servers(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_TEST_STALE", "set when the fork server started")
    with cluster_client(None, 1, {}, tmp_path / "first.log") as client:         # starts the server if none runs
        (first,) = client.run(process_state).values()
    assert first["environment"]["COURSE_TEST_STALE"] == "set when the fork server started"

    monkeypatch.delenv("COURSE_TEST_STALE")
    monkeypatch.setenv("COURSE_TEST_NOW", "set since")
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    monkeypatch.chdir(folder)
    saved = os.umask(0o077)
    try:
        with cluster_client(None, 2, {"COURSE_TEST_GIVEN": "for this run"}, tmp_path / "second.log") as client:
            workers = list(client.run(process_state).values())
    finally:
        os.umask(saved)
    assert len(workers) == 2
    for worker in workers:
        environment = worker["environment"]
        assert "COURSE_TEST_STALE" not in environment
        assert environment["COURSE_TEST_NOW"] == "set since"
        assert environment["COURSE_TEST_GIVEN"] == "for this run"
        assert worker["folder"] == str(folder)
        assert worker["umask"] == 0o077


def open_files_limit() -> tuple[int, int]:
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)


def test_a_forked_worker_has_this_process_limits_after_they_changed(tmp_path):
    """What a worker cannot reset for itself (a limit, here the soft limit on open files) is this process's too:
    the fork server started under other limits is replaced."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    seen = []
    for run, limit in enumerate([soft - 1, soft]):
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
        try:
            with cluster_client(None, 1, {}, tmp_path / f"run-{run}.log") as client:
                seen += [tuple(limits) for limits in client.run(open_files_limit).values()]
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert seen == [(soft - 1, hard), (soft, hard)]
