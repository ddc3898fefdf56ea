// spinscope's flame graph viewer, inlined into `report --html` pages by output/flamegraph.py after
// d3-flame-graph and the d3 modules it uses. It reads the views from the page's JSON
// (#spinscope-flame-data: {views: [{id, title, unit, said, total, marked, tree}], names, kinds}, a tree node
// [name index, value, kind, children]) and draws one at a time, with a view selector, a search box, a reset
// of the zoom (click a frame to zoom in), a legend and a line with the hovered frame's full name.
// Every name is the traced process's: it reaches the page through textContent and attributes only.
//
// `#flame-ID` (the link to a view's table, beside its pattern's evidence) shows view ID.
// `#selftest&view=ID&search=TEXT&zoom=NAME` (for tests/analyzer/test_analyzer_flamegraph.py) shows view ID,
// searches TEXT, zooms into the first frame named NAME (breadth first) and writes what was drawn at each
// step, as JSON, into a pre element of id spinscope-selftest.
(function () {
  "use strict";
  const host = document.getElementById("spinscope-flame");
  const source = document.getElementById("spinscope-flame-data");
  if (!host || !source || !window.flamegraph || !window.d3) return;
  const data = JSON.parse(source.textContent);
  const names = data.names;
  const number = new Intl.NumberFormat("en-US");
  const share = (part, whole) => (whole ? (100 * part / whole).toFixed(part && part < whole / 1000 ? 3 : 1) : "0") + "%";

  function element(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function node(a) {  // [name, value, kind, children] -> what d3-flame-graph reads (value v, children c)
    return {n: a[0], v: a[1], k: a[2], c: a[3].length ? a[3].map(node) : undefined};
  }

  const controls = element("div", {class: "flame-controls"});
  const picker = element("select", {"aria-label": "view"});
  data.views.forEach((v, i) => picker.appendChild(element("option", {value: String(i)},
                                                          `${v.title} (${number.format(v.total)})`)));
  const search = element("input", {type: "search", placeholder: "search frames", "aria-label": "search frames"});
  const reset = element("button", {type: "button"}, "reset zoom");
  controls.append(picker, search, reset);
  const said = element("p", {class: "note"});
  const legend = element("div", {class: "flame-legend"});
  const details = element("div", {class: "flame-details"});
  const chartBox = element("div");
  host.append(controls, said, legend, details, chartBox);

  let chart = null, view = null, found = "";
  function label(d) {
    return `${names[d.data.n]}: ${number.format(d.data.v)} ${view.unit} (${share(d.data.v, view.total)} of the view)`;
  }
  function runSearch() {
    const term = search.value.trim().toLowerCase();
    if (term) chart.search(term); else { found = ""; chart.clear(); }
    details.textContent = found;
  }
  function show(index) {
    view = data.views[index];
    if (chart) chart.destroy();
    said.textContent = view.said;
    legend.replaceChildren();
    const kinds = new Set();
    (function walk(a) { kinds.add(a[2]); a[3].forEach(walk); })(view.tree);
    for (const k of Object.keys(data.kinds).map(Number).filter(k => kinds.has(k))) {
      const item = element("span", {}, "");
      const swatch = element("i");
      swatch.style.background = data.kinds[k][0];
      item.append(swatch, document.createTextNode(data.kinds[k][1] + (view.marked.includes(k) ? " (marked)" : "")));
      legend.appendChild(item);
    }
    chart = flamegraph.default()
      .width(Math.max(chartBox.clientWidth, 300)).cellHeight(18).minFrameSize(1).transitionDuration(250)
      .getName(d => names[d.data.n])
      .label(label)
      .setColorMapper(d => (d.highlight ? "#e600e6" : data.kinds[d.data.k][0]))
      .setSearchMatch((d, term) => !!term && names[d.data.n].toLowerCase().includes(term))
      .setSearchHandler((results, sum, total) => {
        found = `search "${search.value.trim()}": ${number.format(sum)} of ${number.format(total)} ${view.unit}` +
                ` (${share(sum, total)}) in ${number.format(results.length)} frame${results.length === 1 ? "" : "s"}`;
        details.dataset.matched = String(sum);
      })
      .setDetailsHandler(text => { details.textContent = text || found; });
    d3.select(chartBox).datum(node(view.tree)).call(chart);
    if (search.value.trim()) runSearch();
  }
  picker.addEventListener("change", () => show(Number(picker.value)));
  search.addEventListener("input", runSearch);
  reset.addEventListener("click", () => chart.resetZoom());
  let resized = null;
  window.addEventListener("resize", () => {
    clearTimeout(resized);
    resized = setTimeout(() => chart.width(Math.max(chartBox.clientWidth, 300)).update(), 200);
  });
  function fromHash() {  // #flame-ID: a link to a view's table (report.py) shows the view
    const index = data.views.findIndex(v => location.hash === "#flame-" + v.id);
    if (index < 0) return false;
    picker.value = String(index);
    show(index);
    host.scrollIntoView();
    return true;
  }
  window.addEventListener("hashchange", fromHash);
  if (!fromHash()) show(0);

  if (!location.hash.startsWith("#selftest")) return;
  const asked = new URLSearchParams(location.hash.slice("#selftest".length + 1));
  const out = {views: data.views.map(v => v.id)};
  const drawn = () => [...chartBox.querySelectorAll("svg g.frame")];
  const viewIndex = data.views.findIndex(v => v.id === (asked.get("view") || data.views[0].id));
  picker.value = String(viewIndex);
  show(viewIndex);
  out.view = view.id;
  out.frames = drawn().length;
  out.names = drawn().map(g => g.getAttribute("name"));
  if (asked.get("search")) {
    search.value = asked.get("search");
    runSearch();
    out.search = {matched: Number(details.dataset.matched), total: view.total, said: details.textContent,
                  marked: drawn().filter(g => g.querySelector("rect").getAttribute("fill") === "#e600e6").length};
    search.value = "";
    runSearch();
  }
  if (asked.get("zoom")) {
    const target = d3.select(chartBox).datum().descendants().find(d => names[d.data.n] === asked.get("zoom"));
    if (target) chart.zoomTo(target);
    const root = drawn().filter(g => !g.classList.contains("fade"))
      .sort((a, b) => d3.select(a).datum().depth - d3.select(b).datum().depth)[0];
    out.zoom = {found: !!target, root: root.getAttribute("name"), width: Number(root.getAttribute("width")), chart: chart.width(),
                frames: drawn().length, faded: drawn().filter(g => g.classList.contains("fade")).length};
  }
  out.requests = performance.getEntriesByType("resource").length;
  document.body.appendChild(element("pre", {id: "spinscope-selftest"}, JSON.stringify(out)));
})();
