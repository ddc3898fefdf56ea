"""The parameters of a sweep's cell: each one's accepted types and default. The matrix (matrix.py) checks
and fills a cell's parameters from this table, the results table (results.py) has a column for each, and
the verdicts (confidence.py) tell two cells' settings apart by them. Imports nothing: the lab's modules
that need the table stand above it.
"""

# name -> (accepted python types, default). None means "not passed" (the program's own default).
PARAMS = {
    "arch": ((str,), None),
    "workers": ((int,), None),
    "sndbuf": ((int,), None),
    "write_policy": ((str,), None),
    "poller": ((str,), None),
    "backlog": ((int,), None),
    "server_args": ((str,), None),
    "path": ((str,), "/bytes/100"),
    "mix": ((str,), None),
    "concurrency": ((int,), 8),
    "rate": ((int, float), None),
    "burst": ((str,), None),
    "think_ms": ((int, float), None),
    "keepalive": ((str,), "on"),
    "rcvbuf": ((int,), None),
    "threads": ((int,), None),
    "loadgen_args": ((str,), None),
    "net": ((str,), "loopback"),
    "bandwidth": ((str,), None),
    "delay_ms": ((int, float), 0),
    "duration": ((int, float), 3.0),
    "warmup": ((int, float), 1.0),
    "interval": ((int, float), 1.0),
    "server_cpus": ((str, int), None),
    "loadgen_cpus": ((str, int), None),
    "children": ((bool,), None),
    # --- fanout tier: memcached shards the sweep starts and loads itself (lab/shards.py) ---
    "shards": ((int,), None),
    # --- disk-bound cells: a file set served with sendfile, a cgroup memory limit (lab/diskset.py) ---
    "file_set": ((str,), None),
    "memory_max": ((str,), None),
    "drop_caches": ((bool,), None),
    # --- end of the fanout/disk parameters ---
}
# Parameters added after sweeps were recorded: left out of the cell id while unset (None), so that the
# ids of every cell that does not use them stay what they were.
ID_IF_SET = {"shards", "file_set", "memory_max", "drop_caches"}
