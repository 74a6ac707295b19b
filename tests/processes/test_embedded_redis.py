"""The embedded Redis, as a user meets it: ``spark serve`` and ``spark worker`` with no ``REDIS_URL``.

Real processes started the way the docs say; the test finds the one server by its data directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import orjson
import redis
from rq.job import Job
from rq.registry import FinishedJobRegistry

from bot.intake.signature import sign
from bot.redis_server import free_port, join
from bot.web.webhooks import WEBHOOK_PATH
from tests.processes.conftest import ROOT, SECRET, Start, ready, wait_for

INSTALLATION = ROOT / "tests" / "fixtures" / "webhooks" / "installation" / "created.json"


def spark_processes_of(data_dir: Path) -> list[str]:
    """Return the command lines of live processes that belong to ``data_dir``'s embedded Redis."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if str(data_dir) in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


def redis_servers_of(data_dir: Path) -> list[str]:
    return [line for line in spark_processes_of(data_dir) if "redis-server" in line]


def _post_installation(port: int) -> int:
    body = INSTALLATION.read_bytes()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{WEBHOOK_PATH}",
        data=body,
        headers={
            "X-GitHub-Event": "installation",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": sign(SECRET.encode(), body),
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(response.status)


def test_serve_and_worker_share_one_embedded_redis_that_stops_with_them(
    start: Start, env: dict[str, str], tmp_path: Path
) -> None:
    data_dir = Path(env["SPARK_DATA_DIR"]).resolve()
    port = free_port()
    serve = start("serve", "--workers", "3", "--bind", f"127.0.0.1:{port}")
    worker = start("worker")
    wait_for(lambda: ready(port), 60, "spark serve to answer /readyz")

    # One server for the data directory, its socket and pid file in it.
    assert len(redis_servers_of(data_dir)) == 1, spark_processes_of(data_dir)
    socket_path = data_dir / "redis.sock"
    assert socket_path.is_socket()
    assert (data_dir / "redis.pid").read_text().strip() in redis_servers_of(data_dir)[0]
    conn = redis.Redis(unix_socket_path=str(socket_path))
    wait_for(lambda: conn.scard("rq:workers") >= 1, 60, "the worker to register on the same Redis")

    assert _post_installation(port) == 202
    # The worker ran the job the web process queued: both use the one server.
    wait_for(lambda: conn.hget("spark:installations", "424242") == b"octo-org", 30, "the job to run")
    finished = FinishedJobRegistry("spark-interactive", connection=conn)
    wait_for(lambda: finished.count == 1, 30, "RQ to record the job as finished")
    [job_id] = finished.get_job_ids()
    assert Job.fetch(job_id, connection=conn).func_name == "workers.jobs.installation"
    conn.close()
    assert len(redis_servers_of(data_dir)) == 1

    # `spark doctor` says which Redis the roles use and which processes joined it.
    doctor = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "--env-file", os.devnull, "doctor", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    rows = {row["name"]: row for row in orjson.loads(doctor.stdout)["checks"]}
    detail = rows["redis"]["detail"]
    assert rows["redis"]["status"] == "ok", detail
    assert f"embedded server unix://{socket_path}" in detail
    assert "serve pid " in detail and "web pids " in detail and "worker pid " in detail
    assert "1 RQ worker listening" in detail

    for proc in (serve, worker):
        proc.send_signal(signal.SIGTERM)
    for proc in (serve, worker):
        assert proc.wait(timeout=60) in (0, -signal.SIGTERM)
    wait_for(lambda: not spark_processes_of(data_dir), 10, "the embedded Redis to stop after its last user")
    assert not socket_path.exists()

    # Persistence: the next process to join finds what the first run stored.
    check = subprocess.run(
        [sys.executable, "-c", PERSISTED, str(data_dir)], env=env, capture_output=True, text=True, timeout=60
    )
    assert check.stdout.strip() == "octo-org", check.stderr
    wait_for(lambda: not spark_processes_of(data_dir), 10, "the server to stop after the check")


PERSISTED = """
import sys
from pathlib import Path
from bot.redis_server import join
print(join(Path(sys.argv[1]), "check").hget("spark:installations", "424242").decode())
"""


def test_a_killed_worker_does_not_leave_the_server_running(start: Start, env: dict[str, str]) -> None:
    data_dir = Path(env["SPARK_DATA_DIR"]).resolve()
    worker = start("worker")
    wait_for(lambda: len(redis_servers_of(data_dir)) == 1, 60, "the worker to start the embedded Redis")
    conn = redis.Redis(unix_socket_path=str(data_dir / "redis.sock"))
    wait_for(lambda: conn.scard("rq:workers") >= 1, 60, "the worker to register")
    conn.close()
    os.kill(worker.pid, signal.SIGKILL)
    wait_for(lambda: not spark_processes_of(data_dir), 10, "the server to stop once its only user died")


def test_a_removed_data_directory_stops_the_server_and_stays_removed(tmp_path: Path) -> None:
    """``spark demo`` removes its temporary data directory at the end: nothing may make it again."""
    data_dir = (tmp_path / "data").resolve()
    conn = join(data_dir, "test")
    assert conn.ping()
    conn.close()
    shutil.rmtree(data_dir)
    wait_for(lambda: not spark_processes_of(data_dir), 10, "the server to stop once its directory is gone")
    time.sleep(1.0)  # two of the supervisor's polls: it must not have made the directory again meanwhile
    assert not data_dir.exists()
