"""matrices/fanout.toml expands to the fanout tier's cells (fanout 1-20, 0.1 and 20 KB, 1/2/4 loops)."""
import re

from fanout_helpers import FANOUT_ARCHS, ROOT
from spinscope.lab.matrix import parse_matrix


def test_fanout_matrix_cells():
    cells = parse_matrix(ROOT / "matrices" / "fanout.toml").cells
    params = [c.params for c in cells]
    assert {p["arch"] for p in params} == set(FANOUT_ARCHS)
    targets = {re.fullmatch(r"/fanout/(\d+)/(\d+)", p["path"]).groups() for p in params}
    assert {int(f) for f, _ in targets} >= {1, 20} and {int(s) for _, s in targets} == {100, 20000}
    loops = {int(m.group(1)) for p in params if p["arch"] == "fanout-split"
             for m in [re.search(r"--backend-loops (\d+)", p["server_args"])]}
    assert loops == {1, 2, 4}
    assert all("--shards 127.0.0.1:21211," in p["server_args"] for p in params)
