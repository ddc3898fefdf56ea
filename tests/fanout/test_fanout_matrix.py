"""matrices/fanout.toml expands to the fanout tier's cells (fanout 1-20, 0.1 and 20 KB, 1/2/4 loops)."""
import re

from fanout_helpers import FANOUT_ARCHS, ROOT
from spinscope.lab.matrix import parse_matrix


def test_fanout_matrix_cells():
    cells = parse_matrix(ROOT / "matrices" / "fanout.toml").cells
    params = [c.params for c in cells]
    assert {p["arch"] for p in params} == set(FANOUT_ARCHS)
    targets = {re.fullmatch(r"/fanout/(\d+)/(\d+)", p["path"]).groups() for p in params if p["path"]}
    assert {int(f) for f, _ in targets} >= {1, 20} and {int(s) for _, s in targets} == {100, 20000}
    loops = {int(m.group(1)) for p in params if p["arch"] == "fanout-split"
             for m in [re.search(r"--backend-loops (\d+)", p["server_args"])]}
    assert loops == {1, 2, 4}
    # the sweep starts and loads the shards itself: no fixed ports in the matrix
    assert all(p["shards"] == 4 and "--shards" not in (p["server_args"] or "") for p in params)
    tags = {tag for c in cells for tag in c.claims}
    assert tags == {"fanout_tables", "fanout_fig13", "fanout_fig15"}


def test_quick_matrix_leaves_the_fanout_claims_to_the_full_matrices():
    """matrices/quick.toml runs no fanout cell: the fanout claims are throughput and latency comparisons over
    9-13 settings, whose 3 repetitions would cost more than the whole matrix can spare; it declares them
    `needs_full` (fanout.toml and full.toml run them, 3 repetitions)."""
    quick = parse_matrix(ROOT / "matrices" / "quick.toml")
    assert not [c for c in quick.cells if c.params["arch"].startswith("fanout-")]
    assert {"fanout_tables", "fanout_fig13", "fanout_fig15"} <= set(quick.needs_full)
    assert {c.params["repetition"] for c in parse_matrix(ROOT / "matrices" / "fanout.toml").cells} == {0, 1, 2}
