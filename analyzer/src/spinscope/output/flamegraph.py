"""The page's flame graphs (`report --html` of a capture recorded with --stacks): a view of the whole
capture's CPU samples (and one of the other sampler's, where both ran) and, per pattern found, views of its
CPU samples and of its event stacks, the pattern's frames marked, linked from its evidence; search, zoom
and full names on hover.

Drawn in the browser by d3-flame-graph and the d3 modules it uses (vendor/: the files npm publishes, their
licences and sums; scripts/vendor-flamegraph.sh re-fetches and checks them) and our viewer (flamegraph.js),
inlined: the page stays one file and makes no request. The stacks are chosen and folded as the exports do
(analysis/stacks.py's selected and language_view, stack_files.fold): the same samples, the same frames.

Frame and thread names are the traced process's: they reach the page as JSON in a `<script
type="application/json">` with `<`, `>` and `&` written as escapes (htmlpage.json_data), and the viewer puts
them in the page as text only. Without JavaScript each view is a table of its heaviest frames.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from spinscope.analysis import stacks as S
from spinscope.analysis.labels import Assessment
from spinscope.analysis.metrics import Analysis
from spinscope.analysis.patterns import HANDOFF_OVERHEAD
from spinscope.analysis.roles import ROLE_NOUNS
from spinscope.analysis.stack_costs import stack_set
from spinscope.fmt import percent
from spinscope.output import htmlpage
from spinscope.output.stack_files import SAMPLERS, Chosen, chosen, fold
from spinscope.untrusted import printable

HERE = Path(__file__).parent
VENDOR = HERE / "vendor"
TOP_FRAMES = 15  # each view's table (the page without JavaScript): its frames with the most time or events

# What a frame is, in a view: its colour and its words in the legend and the tables. SITE and MACHINERY are
# the view's pattern's frames (its call sites, as the report names them; the hand-off's machinery): marked.
THREADS, KERNEL, RUNTIME, OWN, MACHINERY, SITE = range(6)
KINDS = {THREADS: ("#d9d9d9", "threads (by role)"), KERNEL: ("#bdbdbd", "kernel"),
         RUNTIME: ("#a1d99b", "runtime and libraries"), OWN: ("#6baed6", "the target's own code"),
         MACHINERY: ("#fd8d3c", "the hand-off's machinery"), SITE: ("#e6194b", "the pattern's call site")}


@dataclass
class View:
    id: str
    title: str
    unit: str     # what its values count: CPU samples (time) or events, never both
    said: str     # what went into it, and what was left out (Chosen.said)
    paths: dict   # stack_files.fold(): (root, frame, ...) -> weight
    sites: frozenset = frozenset()  # the pattern's call sites' functions, (name, file): marked
    pattern: str | None = None

    @property
    def total(self) -> int:
        return sum(self.paths.values())

    @property
    def marks(self) -> tuple:
        """The kinds of frame that are the view's pattern's: its call sites, and the hand-off's machinery (as
        pattern_stacks reads it: no other pattern has machinery)."""
        if self.pattern is None:
            return ()
        return (SITE, MACHINERY) if self.pattern == HANDOFF_OVERHEAD else (SITE,)

    def kind(self, frame: S.Frame, path: tuple) -> int:
        """What the frame is on this path (the frames of its stack): for the legend, the colour and the marks."""
        if SITE in self.marks and (frame.name, frame.file) in self.sites:
            return SITE
        if MACHINERY in self.marks and S.machinery_runtime(frame):
            return MACHINERY
        if frame.kind == S.KERNEL:
            return KERNEL
        return OWN if S.is_own_code(frame, path) else RUNTIME


def views(analysis: Analysis, assessment: Assessment) -> list:
    """The whole capture's CPU samples (the exports' sampler's; the other sampler's, the same time, in a view of
    their own), then each pattern found (labels and findings in the report's order) with stacks: its CPU
    samples (in its window, or the hand-off's machinery) and its event stacks."""
    stackset = stack_set(analysis)
    if stackset is None:
        return []
    whole = chosen(analysis, None)
    out = _views(analysis, whole, "all", "the whole capture", None, frozenset(), events=False)
    sampler = whole.samples[0].source if whole.samples else None
    other = [s for s in stackset.stacks if S.is_sample(s) and s.source != sampler] if sampler else []
    if other:
        out += _views(analysis, Chosen(stackset, other, []), "all-other",
                      f"the whole capture, {SAMPLERS[other[0].source]} sampler", None, frozenset(), events=False)
    for item in assessment.ranked():
        if item.name in S.PATTERN_SOURCES:
            sites = frozenset((site["function"], site["file"]) for site in item.call_sites)
            out += _views(analysis, chosen(analysis, item.name), item.name, item.title, item.name, sites)
    return out


def _views(analysis: Analysis, picked: Chosen, key: str, title: str, pattern: str | None, sites: frozenset,
           events: bool = True) -> list:
    groups = thread_groups(analysis, picked.samples + picked.events)
    out = []
    for kind, stacks in (("samples", picked.samples), ("events", picked.events if events else [])):
        unit = "CPU samples" if kind == "samples" else "events"
        view = View(f"{key}.{kind}", f"{title}: {'its ' if pattern else ''}{unit}", unit, picked.said(kind),
                    fold(stacks, groups), sites, pattern)
        if view.total:
            out.append(view)
    return out


def thread_groups(analysis: Analysis, stacks: list) -> dict:
    """tid -> the root its stacks are drawn on: the threads of one role together (a pool's workers are one
    tower, not one per thread), `worker threads (16)`; a thread alone in its role by its name and id."""
    roles = defaultdict(set)
    for s in stacks:
        roles[analysis.threads.get(s.tid, {}).get("role")].add(s.tid)
    names = {}
    for role, tids in roles.items():
        noun = ROLE_NOUNS.get(role, "unknown")
        for tid in tids:
            comm = printable(str(analysis.threads.get(tid, {}).get("comm") or "thread"))
            names[tid] = f"{noun} {comm} ({tid})" if len(tids) == 1 else f"{noun} threads ({len(tids)})"
    return names


# ------------------------------------------------------------------ the data the viewer draws


def function(frame: S.Frame) -> str:
    """A frame as the flame graph names it: its function and file, its lines together (pprof's default
    granularity: the call sites, with their lines, are the report's), as the page shows a name."""
    return printable(f"{frame.name} ({frame.file})" if frame.file else frame.name)


def tree(view: View, names: dict) -> list:
    """The view's paths as a trie, root first: a node is [name, value, kind, children] (the name an index
    into `names`, filled here: one table for every view), children by name; a frame's kind is the most
    marked it has on any path through the node."""
    root: dict = {}
    for (thread, *frames), weight in view.paths.items():
        level = root
        for name, kind in [(thread, THREADS)] + [(function(f), view.kind(f, frames)) for f in frames]:
            node = level.setdefault(name, [0, THREADS, {}])
            node[0] += weight
            node[1] = max(node[1], kind)
            level = node[2]

    def out(level: dict) -> list:
        return [[names.setdefault(name, len(names)), w, k, out(kids)] for name, (w, k, kids) in sorted(level.items())]
    return [names.setdefault(view.title, len(names)), view.total, THREADS, out(root)]


def data(views_: list) -> dict:
    names: dict = {}
    shown = [{"id": v.id, "title": v.title, "unit": v.unit, "said": v.said, "total": v.total, "marked": v.marks,
              "tree": tree(v, names)} for v in views_]
    return {"views": shown, "names": list(names), "kinds": {k: list(v) for k, v in KINDS.items()}}


# ------------------------------------------------------------------ the page's section


def heaviest(view: View) -> list:
    """The view's frames with the most weight on their stacks (a frame counted once per stack, however many
    times it is on it), and the weight where each is the innermost frame: [(name, total, running, kind)]."""
    total, running, kinds = defaultdict(int), defaultdict(int), defaultdict(int)
    for (_, *frames), weight in view.paths.items():
        named = [function(f) for f in frames]
        for name in set(named):
            total[name] += weight
        for name, f in zip(named, frames):
            kinds[name] = max(kinds[name], view.kind(f, frames))
        if frames:
            running[named[-1]] += weight
    ranked = sorted(total, key=lambda name: (-total[name], name))[:TOP_FRAMES]
    return [(name, total[name], running[name], kinds[name]) for name in ranked]


@dataclass
class Section:
    blocks: list   # the page's blocks
    scripts: list  # the JavaScript to inline
    views: list    # of View

    def links(self, pattern: str) -> list:
        """A pattern's views as (text, anchor) for a link to each (its table; the viewer shows it)."""
        return [(v.title, anchor(v)) for v in self.views if v.pattern == pattern]


def anchor(view: View) -> str:
    """Where a view's table is in the page: `#flame-ID` also shows the view in the graph (flamegraph.js)."""
    return f"flame-{view.id}"


def section(analysis: Analysis, assessment: Assessment) -> Section:
    """The flame graphs' part of the page; empty for a capture without stacks."""
    shown = views(analysis, assessment)
    if not shown:
        return Section([], [], [])
    blocks = [htmlpage.heading("Stacks: flame graphs", "flame"),
              htmlpage.paragraph("Each stack is drawn from its thread's role (a pool's threads together) out to "
                                 "the frame that was running, a frame per function, as wide as its share of the "
                                 "view; the runtime's own frames between language frames are left out, as report "
                                 "--folded leaves them out. Click a frame to zoom; search marks the frames whose "
                                 "name holds the text and says their share; hover for a frame's full name. Frames "
                                 "narrower than a pixel are drawn once zoomed into (the search counts them)."),
              "<noscript>" + htmlpage.paragraph("JavaScript is off: each view's heaviest frames are in the "
                                                "tables below.", "note") + "</noscript>",
              '<div id="spinscope-flame" class="flame"></div>',
              htmlpage.json_data("spinscope-flame-data", data(shown))]
    for view in shown:
        rows = [[name, f"{percent(t / view.total)}", f"{percent(s / view.total)}", f"{t:,}", KINDS[k][1]]
                for name, t, s, k in heaviest(view)]
        blocks.append(htmlpage.details(f"{view.title}: {view.said}; its {len(rows)} heaviest frames",
                                       htmlpage.table(["frame", "on its stacks", "running", view.unit, "what"],
                                                      rows), anchor(view)))
    return Section(blocks, [licences() + "\n" + "\n".join(_vendored()), (HERE / "flamegraph.js").read_text()], shown)


def _manifest() -> list:
    """(package, version) of each vendored file, in the order they load."""
    lines = (VENDOR / "manifest.txt").read_text().splitlines()
    return [tuple(line.split()[:2]) for line in lines if line.strip() and not line.startswith("#")]


def _vendored() -> list:
    return [(VENDOR / f"{name}.min.js").read_text() for name, _ in _manifest()]


def licences() -> str:
    """The vendored packages' licences, each text once with the packages it covers, as one comment."""
    packages: dict = defaultdict(list)
    for name, version in _manifest():
        packages[(VENDOR / f"{name}.LICENSE").read_text().strip()].append(f"{name} {version}")
    parts = [f"{', '.join(names)}:\n\n{text}" for text, names in packages.items()]
    return "/*! The flame graph: d3-flame-graph and the d3 modules it uses, as npm publishes them.\n\n" + \
        "\n\n".join(parts).replace("*/", "* /") + "\n*/"
