"""gRPC-Java (grpc-netty-shaded from Maven Central, h2c on 127.0.0.1) under unary calls, 1 and 16 outstanding
on each of 4 channels: the requests counted are the calls (streams, schema 8) within 1% of the client's
count, and the executor vs directExecutor pair keeps its labels both ways: handoff-overhead on the executor
(each call handed from the event loop to a worker and back), not on directExecutor (the handler runs on the
event loop).

Before schema 8 a request on these connections was an exchange: with 16 calls in flight one read carried
many requests and one write many responses, so about one request was counted per ten calls (issue 31).
Each configuration is recorded once per module, by the first test that needs it (4 s warmup, 3 s load).
"""
from __future__ import annotations

import subprocess

import pytest

from realserver_harness import GRPC_CONFIGS, ensure_grpc, ensure_ready, missing_binaries, record_config
from realserver_harness import www  # noqa: F401  (fixture)

COUNT_TOLERANCE = 0.01
SERIOUS = ("warning", "critical")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, www):  # noqa: F811
    runs = {}

    def get(name: str):
        if name not in runs:
            config = GRPC_CONFIGS[name]
            if missing := missing_binaries(config.server):
                pytest.skip(f"grpc: {', '.join(missing)} not installed (scripts/setup.sh installs it)")
            try:
                ensure_grpc()
            except subprocess.CalledProcessError as e:
                tail = (e.stderr or b"").decode(errors="replace").strip().splitlines()[-3:]
                pytest.skip(f"grpc: {' '.join(map(str, e.cmd[:2]))} failed (no Maven Central?): {' | '.join(tail)}")
            ensure_ready()
            runs[name] = record_config(config, tmp_path_factory.mktemp(name), www)
        return runs[name]
    return get


@pytest.mark.parametrize("name", list(GRPC_CONFIGS))
def test_requests_are_the_calls(recorded, name):
    run = recorded(name)
    calls, totals = run.load["requests"], run.capture["totals"]
    assert run.load["errors"] == 0 and calls > 0, run.load
    assert totals["h2_connections"] == run.load["connections"]  # each channel's connection, opened after attach
    assert totals["h2_lost"] == totals["h2_lost_calls"] == totals["h2_streams_unfollowed"] == 0
    assert totals["h2_bad_frames"] == 0  # every frame header checked (schema 9): none refused
    counted = run.capture["requests"]["count"]
    assert abs(counted - calls) <= COUNT_TOLERANCE * calls, (counted, calls)


@pytest.mark.parametrize("outstanding", (1, 16))
def test_executor_pair_keeps_its_labels(recorded, outstanding):
    executor = recorded(f"grpc-executor-c{outstanding}").assessment()
    direct = recorded(f"grpc-direct-c{outstanding}").assessment()
    bad = [label for label in executor.labels if label.name == "handoff-overhead" and label.severity in SERIOUS]
    good = [label for label in direct.labels if label.name == "handoff-overhead" and label.severity in SERIOUS]
    assert bad, [(label.name, label.severity, label.summary) for label in executor.labels]
    assert not good, [(label.name, label.severity, label.summary) for label in good]
