"""A suite on a real two-node Ray cluster on loopback (``ray start --head`` and a second ``ray
start --address``, each in a session of its own): the items spread over both nodes (the report
names each item's node), the second node is killed mid-suite, its items run again on the head,
and the verdicts and numbers equal a local run's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import run_tflkit
from tests.test_regress_scale import suite_dir, tflkit, untimed  # noqa: F401 (a fixture)

REPO = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))
# Ray turns token authentication on for a ``ray start --head`` when ~/.ray/auth_token exists
# (any local ``ray.init()`` on the machine writes one) while its clients stay off: the mode is
# set here for the nodes and every client, so the cluster does not depend on the home folder.
AUTH = {"RAY_AUTH_MODE": "disabled"}
ENV = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", XDG_RUNTIME_DIR="/tmp", **AUTH)
NODES = """
import json, ray, sys
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
print(json.dumps([[n["NodeID"][:12], "node:__internal_head__" in n["Resources"]]
                  for n in ray.nodes() if n["Alive"]]))
"""


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports (each held until all are chosen, so none comes twice)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def _node(temp_dir: Path, *args: str, env: dict[str, str] = ENV) -> subprocess.Popen[bytes]:
    """``ray start --block ARGS`` in a session of its own (its node's processes with it), its
    sessions and logs under ``temp_dir`` (nothing shared with another Ray on the machine)."""
    common = ["--block", "--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats"]
    return subprocess.Popen(
        [RAY, "start", *common, f"--temp-dir={temp_dir}", '--resources={"tflkit_gpu": 1}', *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _nodes(address: str, env: dict[str, str] = ENV) -> tuple[list[list], str]:
    """The cluster's live nodes ([node id, is head]) and, when it did not answer, why."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", NODES, address],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        return [], "ray.init did not return in 120 s"
    if done.returncode != 0:
        return [], done.stderr.strip()[-1500:]
    return json.loads(done.stdout), ""


def _logs(temp_dir: Path) -> str:
    """The last lines of the Ray logs under ``temp_dir`` (for a cluster that did not start)."""
    tails = []
    for log in sorted(temp_dir.glob("session_*/logs/*")):
        if log.suffix in (".out", ".err", ".log") and log.is_file() and log.stat().st_size:
            lines = log.read_text(errors="replace").splitlines()[-5:]
            tails.append(f"--- {log.name}\n" + "\n".join(lines))
    return "\n".join(tails)[-6000:]


def _kill(node: subprocess.Popen[bytes]) -> None:
    """The node dies: SIGKILL to every process of its session (the raylet's group and the Ray
    workers, which Ray puts in process groups of their own), except tflkit's item children,
    which must end with their worker by themselves."""
    from tflkit.proc.worker import target_of
    from tflkit.regress.suite import child_main

    mark = target_of(child_main).encode()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(node.pid, signal.SIGKILL)
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or _session_of(int(entry.name)) != node.pid:
                continue
            if mark not in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue
    node.wait()


@pytest.fixture
def cluster() -> Iterator[tuple[str, subprocess.Popen[bytes], str]]:
    """(address, the second node's process, its node id): a head and a worker node; when the
    cluster does not come up, the assertion carries the driver's error and the Ray logs."""
    port, client_port = _free_ports(2)
    address = f"127.0.0.1:{port}"
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # short: Ray's socket paths
    head = _node(temp_dir, "--head", f"--port={port}", "--include-dashboard=false",
                 f"--ray-client-server-port={client_port}")  # fmt: skip
    worker = None
    try:
        deadline = time.monotonic() + 240
        while len((answer := _nodes(address))[0]) < 1:
            alive = head.poll() is None and time.monotonic() < deadline
            assert alive, f"the head did not start: {answer[1]}\n{_logs(temp_dir)}"
        worker = _node(temp_dir, f"--address={address}")
        while len((answer := _nodes(address))[0]) < 2:
            alive = worker.poll() is None and time.monotonic() < deadline
            assert alive, f"no second node: {answer[1]}\n{_logs(temp_dir)}"
        second = next(node for node, is_head in answer[0] if not is_head)
        yield address, worker, second
    finally:
        for node in (worker, head):
            if node is not None:
                _kill(node)
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_suite_on_two_nodes_survives_a_killed_node(
    suite_dir: Path,  # noqa: F811
    cluster: tuple[str, subprocess.Popen[bytes], str],
) -> None:
    address, worker, second = cluster
    local = tflkit("regress", "check", "--suite", "tflkit.toml", "--json", cwd=suite_dir)
    assert local.returncode == 1, local.stderr
    results = suite_dir / "ray.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tflkit", "regress", "check", "--suite", "tflkit.toml",
         "--cluster", address, "--results", str(results), "--json"],
        cwd=suite_dir, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while True:  # the second node has finished an item: kill it while it works on the next
            records = results.read_text().splitlines()[1:] if results.exists() else []
            ran = [json.loads(r)["result"]["nodes"] for r in records]
            if [second] in ran:
                break
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.05)
        killed_after = len(records)
        _kill(worker)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err.decode()
    report = json.loads(out)
    nodes = {node for model in report["models"] for node in model["nodes"]}
    assert second in nodes and len(nodes) == 2, nodes
    items = [json.loads(r) for r in results.read_text().splitlines()[1:]]
    assert killed_after < len(items) and all(not i["retry"] for i in items)
    for model in report["models"]:
        model.pop("nodes")
    expected = json.loads(local.stdout)
    for model in expected["models"]:
        model.pop("nodes")
    assert untimed(report) == untimed(expected)


FREE = """
import json, ray, sys, time
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + 60
while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"]:
    assert time.monotonic() < deadline, ray.available_resources()
    time.sleep(0.2)
print(json.dumps(ray.available_resources().get("CPU")))
"""


def _item_children(suite: Path) -> list[str]:
    """Command lines of live item children of ``suite`` (whichever engine started them)."""
    from tflkit.proc.worker import target_of
    from tflkit.regress.suite import child_main

    mark = target_of(child_main).encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
            if (
                mark in cmd
                and str(suite).encode() in cmd
                and "\nState:\tZ" not in (entry / "status").read_text()
            ):
                found.append(cmd.replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_a_signal_on_the_cluster_cancels_every_task(
    sig: signal.Signals,
    suite_dir: Path,  # noqa: F811
    cluster: tuple[str, subprocess.Popen[bytes], str],
) -> None:
    """Ctrl-C or SIGTERM stops every task through the cancel flag: the process exits 128 +
    the signal with its one line naming it, no task or item child is left, and the finished
    results are kept."""
    from tests.cli import default_sigint

    address = cluster[0]
    results = suite_dir / f"ray-interrupted-{sig.name}.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tflkit", "regress", "check", "--suite", "tflkit.toml",
         "--cluster", address, "--results", str(results)],
        cwd=suite_dir, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while not (results.exists() and len(results.read_text().splitlines()) >= 2):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err.decode()
    assert f"interrupted ({sig.name})" in err.decode() and "Traceback" not in err.decode()
    kept = results.read_text().splitlines()[1:]
    total = len(json.loads(results.read_text().splitlines()[0])["items"])
    assert 1 <= len(kept) < total
    free = subprocess.run(
        [sys.executable, "-c", FREE, address], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert free.returncode == 0, free.stderr  # every CPU of the cluster free: no task left
    deadline = time.monotonic() + 10
    while (left := _item_children(suite_dir.resolve())) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, left


def _session_of(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[3])  # session id (after state, ppid, pgrp)


def _running_on(node: subprocess.Popen[bytes], suite: Path) -> bool:
    """An item child of ``suite`` runs under a Ray worker of ``node`` (its session)."""
    from tflkit.proc.worker import target_of
    from tflkit.regress.suite import child_main

    mark, where = target_of(child_main).encode(), str(suite).encode()
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
            if mark in cmd and where in cmd:
                status = (entry / "status").read_text()
                ppid = int(next(ln for ln in status.splitlines() if ln.startswith("PPid:"))[5:])
                if _session_of(ppid) == node.pid:
                    return True
        except (OSError, StopIteration, ValueError):
            continue
    return False


def test_an_item_on_a_killed_node_is_lost_after_its_tries_and_rerun_next_time(
    suite_dir: Path,  # noqa: F811
    cluster: tuple[str, subprocess.Popen[bytes], str],
) -> None:
    address, worker, _ = cluster
    results = suite_dir / "ray-lost.jsonl"
    args = ["regress", "check", "--suite", "tflkit.toml", "--cluster", address,
            "--results", str(results), "--json"]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "tflkit", *args, "--tries", "1"],
        cwd=suite_dir, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while not _running_on(worker, suite_dir.resolve()):  # an item at work on the node
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.02)
        _kill(worker)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, err.decode()  # an item could not be checked
    lost = [m for m in json.loads(out)["models"] if m["error"] and "lost" in m["error"]]
    assert lost and "after 1 tries" in lost[0]["error"], out.decode()[-2000:]
    records = [json.loads(r) for r in results.read_text().splitlines()[1:]]
    assert [r["retry"] for r in records].count(True) >= 1
    deadline = time.monotonic() + 10  # the killed node's item child ends with its worker
    while (left := _item_children(suite_dir.resolve())) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, left

    # the head alone now: the lost item runs there
    again = run_tflkit(*args, cwd=suite_dir, env=AUTH, timeout=900)
    assert again.returncode == 1, again.stderr
    assert not any(m["error"] for m in json.loads(again.stdout)["models"])


def test_a_cluster_that_asks_for_a_token_is_one_usage_line(
    suite_dir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A head with token authentication, a driver without the token: exit 2 and one line that
    says what the cluster wants (Ray's own message names only the address)."""
    token = tmp_path / "token"
    token.write_text(os.urandom(32).hex())
    secured = dict(ENV, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    port, client_port = _free_ports(2)
    address = f"127.0.0.1:{port}"
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    head = _node(temp_dir, "--head", f"--port={port}", "--include-dashboard=false",
                 f"--ray-client-server-port={client_port}", env=secured)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not (answer := _nodes(address, env=secured))[0]:
            alive = head.poll() is None and time.monotonic() < deadline
            assert alive, f"the head did not start: {answer[1]}\n{_logs(temp_dir)}"
        args = ["regress", "check", "--suite", "tflkit.toml", "--cluster", address]
        refused = run_tflkit(*args, cwd=suite_dir, env=AUTH, timeout=300)
    finally:
        _kill(head)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert refused.returncode == 2, refused.stderr
    (line,) = [ln for ln in refused.stderr.splitlines() if ln.startswith("tflkit: error:")]
    assert "the cluster uses token authentication: set RAY_AUTH_MODE=token" in line, line
    assert "Traceback" not in refused.stderr
