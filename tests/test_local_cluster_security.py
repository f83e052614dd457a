"""The class grader's local Dask cluster on a shared machine: on a hub every student is a local account, the
cluster's ports are on 127.0.0.1 for anyone to connect to, and a client of the scheduler runs code as the grader
(a review showed a student reading the masters that way). The cluster speaks TLS with certificates made for its
run, so a client without them gets nothing; its scratch space is a folder of its own, gone after the run."""

from __future__ import annotations

import pytest
from distributed import Client
from distributed.security import Security

from autograder.cluster import cluster_client

pytestmark = pytest.mark.quick


def test_a_client_without_the_runs_certificates_cannot_reach_the_local_cluster(tmp_path):
    with cluster_client(None, 1, {}, tmp_path / "log.txt") as client:
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:")
        scratch = client.run(lambda dask_worker: dask_worker.local_directory)
        # Certificates of one's own (another run's, or made for the attack), and no TLS at all.
        for attempt, security in ((address, Security.temporary()), (address.replace("tls://", "tcp://"), None)):
            with pytest.raises((OSError, TimeoutError)):
                Client(attempt, security=security, timeout=3).close()
        assert client.submit(sum, [1, 2]).result() == 3            # the run's own client still works
    folder = next(iter(scratch.values()))
    assert "course-grading-dask-" in folder and not __import__("os").path.exists(folder)
