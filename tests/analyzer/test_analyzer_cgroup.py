"""A cgroup as the target (`record --cgroup`, schema 4's target.cgroup): options refused before the collector
starts, and captures of a cgroup read, reported (terminal, JSON, HTML) and diffed, named after the cgroup."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import captures
from spinscope.analysis.capture import load
from spinscope.analysis.schema import layout_differences
from spinscope.commands.record import cgroup_dir
from spinscope.errors import SpinscopeError

CGROUP = {"path": "/system.slice/web.service", "id": 4242}


def cgroup_capture(path: str = CGROUP["path"]) -> dict:
    """Two processes of a cgroup: an event loop spinning on empty polls (100) and a worker (200)."""
    doc = captures.capture([captures.thread(100, "loop", poll_calls=5000, poll_zero=4900, oncpu_ns=10**9),
                            captures.thread(200, "worker", futex_waits=10)])
    doc["schema"] = 4
    doc["threads"][1]["pid"] = 200
    doc["target"] = {"pid": 0, "cgroup": {**CGROUP, "path": path}, "comm": path.rsplit("/", 1)[-1] or "/",
                     "exe": None, "argc": 0, "cmdline": None, "follow_children": False, "pids": [100, 200],
                     "execs": []}
    return doc


def test_a_cgroup_capture_is_named_after_its_cgroup(capture_file):
    cap = load(capture_file(cgroup_capture()))
    assert cap.cgroup == CGROUP
    assert cap.name == "cgroup /system.slice/web.service"
    assert load(capture_file(captures.capture([captures.thread(7)]), "pid.json")).cgroup is None


def test_report_terminal_json_and_html_of_a_cgroup_capture(capture_file, cli, tmp_path):
    path = capture_file(cgroup_capture())
    result = cli("report", path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("spinscope report cgroup /system.slice/web.service: 10.0 s, 2 processes, 2 threads")
    result = cli("report", path, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["capture"]["target"]["cgroup"] == CGROUP
    html = tmp_path / "report.html"
    result = cli("report", path, "--html", html)
    assert result.returncode == 0, result.stderr
    assert "cgroup /system.slice/web.service" in html.read_text()


def test_diff_of_a_process_and_a_cgroup(capture_file, cli):
    before = capture_file(captures.capture([captures.thread(100, "loop", poll_calls=10)]), "before.json")
    after = capture_file(cgroup_capture(), "after.json")
    result = cli("diff", before, after)
    assert result.returncode == 0, result.stderr
    assert "before: server (pid 100)" in result.stdout
    assert "after:  cgroup /system.slice/web.service" in result.stdout


def test_a_cgroup_path_is_shown_as_data(capture_file, cli, tmp_path):
    """Whoever made the cgroup chose its name: no escape sequence reaches the terminal or the page."""
    path = capture_file(cgroup_capture("/pods/\x1b[31mred<script>"))
    result = cli("report", path, "--html", tmp_path / "r.html")
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "cgroup /pods/\\x1b[31mred<script>" in result.stdout
    page = (tmp_path / "r.html").read_text()
    assert "\x1b" not in page and "red<script>" not in page and "red&lt;script&gt;" in page


@pytest.mark.parametrize("value, message", [
    ("/a", "target.cgroup is not a object or null ('/a')"),
    ({"path": 5, "id": 1}, "target.cgroup.path is not a text (5)"),
    ({"path": "/a", "id": -1}, "target.cgroup.id is not a count (-1)"),
])
def test_a_malformed_target_cgroup_is_refused(capture_file, value, message):
    doc = cgroup_capture()
    doc["target"]["cgroup"] = value
    with pytest.raises(SpinscopeError, match="malformed spinscope capture: " + message.replace("(", r"\(")
                       .replace(")", r"\)").replace("[", r"\[").replace("?", r"\?")):
        load(capture_file(doc))


def test_layout_has_target_cgroup_null_or_whole():
    doc = cgroup_capture()
    assert not [line for line in layout_differences(doc) if line.startswith("target.cgroup")]
    doc["target"]["cgroup"] = None
    assert not [line for line in layout_differences(doc) if line.startswith("target.cgroup")]
    doc["target"]["cgroup"] = {"path": "/a"}
    assert "target.cgroup: missing ['id'], unexpected []" in layout_differences(doc)
    del doc["target"]["cgroup"]
    assert any(line.startswith("target: missing ['argc', 'cgroup'") or "'cgroup'" in line
               for line in layout_differences(doc) if line.startswith("target:"))


# --- record --cgroup ---------------------------------------------------------------------------------

@pytest.fixture
def hierarchy(tmp_path):
    """A stand-in host: a cgroup2 mount with a/b and a file, a cgroup v1 mount, a plain directory, and the
    mountinfo that says which is which."""
    unified, v1, plain = tmp_path / "unified", tmp_path / "memory", tmp_path / "plain"
    (unified / "a" / "b").mkdir(parents=True)
    (unified / "a" / "cgroup.procs").write_text("")
    (v1 / "x").mkdir(parents=True)
    plain.mkdir()
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
                         f"41 31 0:38 / {unified} rw,relatime - cgroup2 cgroup2 rw\n"
                         f"42 31 0:39 / {v1} rw,relatime shared:5 - cgroup cgroup rw,memory\n")
    return unified, v1, plain, mountinfo


def test_cgroup_paths_resolve_as_the_collector_resolves_them(hierarchy):
    unified, _, _, mountinfo = hierarchy
    assert cgroup_dir(str(unified / "a" / "b"), mountinfo) == unified / "a" / "b"  # on this host
    assert cgroup_dir("a/b", mountinfo) == unified / "a" / "b"  # below the cgroup2 mount
    assert cgroup_dir("/a/b", mountinfo) == unified / "a" / "b"  # as /proc/PID/cgroup shows it
    assert cgroup_dir(".", mountinfo) == unified  # the root


def test_a_cgroup_not_made_yet_resolves_below_the_mount_for_the_exporter(hierarchy):
    unified, _, _, mountinfo = hierarchy
    for arg in ("pod/x", "/pod/x", str(unified / "pod" / "x")):
        assert cgroup_dir(arg, mountinfo, must_exist=False) == unified / "pod" / "x"
        with pytest.raises(SpinscopeError, match="no such cgroup"):
            cgroup_dir(arg, mountinfo)


@pytest.mark.parametrize("which, message", [
    (lambda u, v, p: "", "--cgroup must name a cgroup v2 directory, not ''"),
    (lambda u, v, p: "/no/such", "--cgroup /no/such: no such cgroup"),
    (lambda u, v, p: "a/missing", "--cgroup a/missing: no such cgroup"),
    (lambda u, v, p: str(u / "a" / "cgroup.procs"), "--cgroup {u}/a/cgroup.procs is a file, not a cgroup directory"),
    (lambda u, v, p: str(v / "x"), "--cgroup {v}/x is in a cgroup v1 hierarchy: spinscope follows cgroup v2 "
                                   "(the unified hierarchy, mounted at {u})"),
    (lambda u, v, p: str(p), "--cgroup {p} is not in a cgroup v2 hierarchy (mounted at {u})"),
])
def test_bad_cgroups_are_refused_in_one_line(hierarchy, which, message):
    unified, v1, plain, mountinfo = hierarchy
    with pytest.raises(SpinscopeError) as raised:
        cgroup_dir(which(unified, v1, plain), mountinfo)
    assert str(raised.value) == message.format(u=unified, v=v1, p=plain)
    assert raised.value.exit_code == 2


def test_no_cgroup2_mount(tmp_path):
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n")
    with pytest.raises(SpinscopeError, match="--cgroup x: no cgroup v2 hierarchy is mounted on this host"):
        cgroup_dir("x", mountinfo)


@pytest.fixture
def collector(stand_in_collector):
    return stand_in_collector()


@pytest.mark.parametrize("options, message", [
    (["--cgroup", "x", "--pid", "1"], "--cgroup goes without --pid: it traces every process in the cgroup, "
                                      "children included"),
    (["--cgroup", "x", "--children"], "--cgroup goes without --children: it traces every process in the cgroup, "
                                      "children included"),
    ([], "--pid PID, --cgroup PATH or -- COMMAND is required"),
    (["--cgroup", ""], "--cgroup must name a cgroup v2 directory, not ''"),
])
def test_record_refuses_bad_targets_before_the_collector_starts(options, message, collector, cli):
    ran, env = collector
    result = cli("record", *options, env=env)
    assert result.returncode == 2
    assert result.stderr == f"spinscope record: error: {message}\n"
    assert not ran.exists()


def _cgroup2_mount() -> str | None:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    return next((line.split(" - ")[0].split(" ")[4] for line in lines if " - cgroup2 " in line), None)


@pytest.mark.skipif(_cgroup2_mount() is None, reason="no cgroup v2 hierarchy mounted here")
def test_record_passes_the_resolved_cgroup_to_the_collector(collector, cli, tmp_path):
    ran, env = collector
    result = cli("record", "--cgroup", ".", "-o", tmp_path / "c.json", env=env)  # the root, below the mount
    assert result.returncode == 0, result.stderr
    args = ran.read_text().split()
    assert args[:2] == ["--cgroup", os.path.realpath(_cgroup2_mount())] and "--pid" not in args
