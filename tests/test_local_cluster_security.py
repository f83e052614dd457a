"""The class grader's local Dask cluster on a shared machine: on a hub every student is a local account, the
cluster's ports are on 127.0.0.1 for anyone to connect to, and a client of the scheduler runs code as the grader
(a review showed a student reading the masters that way). The cluster speaks TLS with certificates made for its
run, so a client without them gets nothing; its scratch space is a folder of its own, gone after the run."""

from __future__ import annotations

import pytest
from distributed import Client
from distributed.security import Security

from autograder.classgrader.cluster import cluster_client

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


def test_another_account_reading_the_clusters_http_port_gets_only_its_health(tmp_path):
    """Dask's HTTP server has no TLS and listens on loopback, where every local account reaches it: its info and
    json pages named the workers, the scratch folder, the logs and the grading task's live call stack."""
    import urllib.error
    import urllib.request

    def status(url: str) -> int:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return answer.status
        except urllib.error.HTTPError as refused:
            return refused.code

    with cluster_client(None, 1, {}, tmp_path / "log.txt") as client:
        ports = {"scheduler": client.scheduler_info()["services"]["dashboard"]}
        ports.update({f"worker {n}": port for n, port in enumerate(
            client.run(lambda dask_worker: dask_worker.http_server.port).values())})
        for who, port in ports.items():
            base = f"http://127.0.0.1:{port}"
            assert status(f"{base}/health") == 200, who
            for route in ("/info/main/workers.html", "/info/logs/", "/json/counts.json", "/json/identity.json",
                          "/metrics", "/statics/", "/proxy/8786/127.0.0.1/status"):
                assert status(base + route) == 404, f"{who} serves {route}"
            with urllib.request.urlopen(f"{base}/sitemap.json", timeout=5) as answer:   # Dask's list of routes
                assert set(__import__("json").load(answer)["paths"]) <= {"/health", "/sitemap.json"}, who
