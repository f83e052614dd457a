"""A local cluster's workers are forked from a fork server that outlives the run (autograder/cluster.py): each
still starts with this process's environment, folder and umask as they are now, not as they were when the
server started, as a new process would."""

from __future__ import annotations

import os

from autograder.cluster import cluster_client, current_umask


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
