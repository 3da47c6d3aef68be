// The sample browser of an mrcr-eval report. Every text from the data goes in through textContent
// (never innerHTML), so a reply holding HTML shows as text. The table renders a page at a time and a
// word diff is computed only when a sample is opened, which keeps thousands of long samples responsive.
(function () {
  "use strict";
  var PAGE_SIZE = 100;
  // Above this many cells (20 MB) the word diff's table costs too much: show the texts unmarked. Under
  // it the shorter side has at most ~3,000 words, so every length fits the table's 16 bits.
  var MAX_DIFF_CELLS = 10000000;
  var samples = JSON.parse(document.getElementById("samples-data").textContent);
  var outcomeOrder = JSON.parse(document.getElementById("outcome-order").textContent);
  var state = { view: [], page: 0, open: -1 };

  function $(id) { return document.getElementById(id); }
  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function fmt(value) {
    if (value === null || value === undefined) return "n/a";
    if (typeof value === "boolean") return value ? "yes" : "no";
    if (typeof value === "number" && !Number.isInteger(value)) return String(Number(value.toFixed(4)));
    return String(value);
  }
  function pct(value) { return value === null || value === undefined ? "n/a" : (100 * value).toFixed(1) + "%"; }
  function classToken(text) { return String(text).replace(/[^A-Za-z0-9_-]/g, "_"); }
  function badge(outcome) { return el("span", "badge o-" + classToken(outcome), outcome); }

  samples.forEach(function (s, i) { s._index = i; });

  function fillSelect(select, values, label) {
    values.forEach(function (value) {
      var option = el("option", null, label ? label(value) : value);
      option.value = String(value);
      select.appendChild(option);
    });
  }
  function distinct(key) {
    var seen = new Map();
    samples.forEach(function (s) { if (!seen.has(s[key])) seen.set(s[key], s); });
    return seen;
  }
  var bins = Array.from(distinct("bin").values()).sort(function (a, b) { return a.bin_upper - b.bin_upper; });
  fillSelect($("f-bin"), bins.map(function (s) { return s.bin; }));
  fillSelect($("f-needles"), Array.from(distinct("n_needles").keys()).sort(function (a, b) { return a - b; }));
  var outcomes = Array.from(distinct("outcome").keys());
  outcomes.sort(function (a, b) {
    var ia = outcomeOrder.indexOf(a), ib = outcomeOrder.indexOf(b);
    ia = ia < 0 ? outcomeOrder.length : ia; ib = ib < 0 ? outcomeOrder.length : ib;
    return ia - ib || (a < b ? -1 : a > b ? 1 : 0);
  });
  fillSelect($("f-outcome"), outcomes);

  function bound(input) {
    if (input.value.trim() === "") return null;
    var value = Number(input.value);
    return Number.isFinite(value) ? value : null;
  }
  function byFileRow(a, b) { return (a.file < b.file ? -1 : a.file > b.file ? 1 : 0) || a.row - b.row; }
  function byScore(direction) {
    // Unscored samples (errors, skipped) go last either way.
    return function (a, b) {
      if (a.score === null && b.score === null) return byFileRow(a, b);
      if (a.score === null) return 1;
      if (b.score === null) return -1;
      return direction * (a.score - b.score) || byFileRow(a, b);
    };
  }

  function applyFilters() {
    var bin = $("f-bin").value, needles = $("f-needles").value, outcome = $("f-outcome").value;
    var low = bound($("f-min")), high = bound($("f-max"));
    state.view = samples.filter(function (s) {
      if (bin !== "" && s.bin !== bin) return false;
      if (needles !== "" && String(s.n_needles) !== needles) return false;
      if (outcome !== "" && s.outcome !== outcome) return false;
      // A score range keeps only scored samples.
      if ((low !== null || high !== null) && s.score === null) return false;
      if (low !== null && s.score < low) return false;
      if (high !== null && s.score > high) return false;
      return true;
    });
    var sort = $("f-sort").value;
    state.view.sort(sort === "score-asc" ? byScore(1) : sort === "score-desc" ? byScore(-1) : byFileRow);
    state.page = 0;
    renderPage();
  }

  function pageCount() { return Math.max(1, Math.ceil(state.view.length / PAGE_SIZE)); }

  function renderPage() {
    var tbody = $("samples").tBodies[0];
    var start = state.page * PAGE_SIZE;
    var rows = document.createDocumentFragment();
    state.view.slice(start, start + PAGE_SIZE).forEach(function (s, offset) {
      var tr = el("tr");
      tr.dataset.position = String(start + offset);
      tr.dataset.index = String(s._index);
      var file = el("td", "file", s.file);
      file.title = s.file;
      tr.appendChild(file);
      tr.appendChild(el("td", "num row", s.row));
      tr.appendChild(el("td", "bin", s.bin));
      tr.appendChild(el("td", "num needles", s.n_needles));
      var outcome = el("td", "outcome");
      outcome.dataset.outcome = s.outcome;
      outcome.appendChild(badge(s.outcome));
      tr.appendChild(outcome);
      tr.appendChild(el("td", "num score", fmt(s.score)));
      tr.appendChild(el("td", "prefix", fmt(s.prefix)));
      tr.appendChild(el("td", "status", s.status));
      rows.appendChild(tr);
    });
    tbody.replaceChildren(rows);
    var count = $("count");
    count.dataset.shown = String(state.view.length);
    count.dataset.total = String(samples.length);
    count.textContent = state.view.length === samples.length
      ? samples.length + " samples"
      : state.view.length + " of " + samples.length + " samples";
    $("page").textContent = "page " + (state.page + 1) + " of " + pageCount();
    $("prev").disabled = state.page === 0;
    $("next").disabled = state.page >= pageCount() - 1;
  }

  // Word diff: the longest common subsequence of the two texts' words (after their common head and
  // tail are set aside), on a flat table of suffix lengths.
  function units(text) {
    var found = [], re = /(\S+)(\s*)/g, lead = /^\s*/.exec(text)[0], match;
    while ((match = re.exec(text)) !== null) found.push({ word: match[1], space: match[2] });
    return { lead: lead, units: found };
  }
  function diffWords(a, b) {
    var ids = new Map();
    function id(word) { if (!ids.has(word)) ids.set(word, ids.size); return ids.get(word); }
    var x = a.map(function (u) { return id(u.word); }), y = b.map(function (u) { return id(u.word); });
    var head = 0, n = x.length, m = y.length;
    while (head < n && head < m && x[head] === y[head]) head++;
    var tail = 0;
    while (tail < n - head && tail < m - head && x[n - 1 - tail] === y[m - 1 - tail]) tail++;
    var xs = x.slice(head, n - tail), ys = y.slice(head, m - tail), N = xs.length, M = ys.length;
    var ops = [], i, j, k;
    for (k = 0; k < head; k++) ops.push(["=", k, k]);
    if ((N + 1) * (M + 1) > MAX_DIFF_CELLS) return null;
    var W = M + 1, table = new Uint16Array((N + 1) * W);
    for (i = N - 1; i >= 0; i--) {
      for (j = M - 1; j >= 0; j--) {
        table[i * W + j] = xs[i] === ys[j] ? table[(i + 1) * W + j + 1] + 1
          : Math.max(table[(i + 1) * W + j], table[i * W + j + 1]);
      }
    }
    i = 0; j = 0;
    while (i < N || j < M) {
      if (i < N && j < M && xs[i] === ys[j]) { ops.push(["=", head + i, head + j]); i++; j++; }
      else if (j >= M || (i < N && table[(i + 1) * W + j] >= table[i * W + j + 1])) { ops.push(["-", head + i, -1]); i++; }
      else { ops.push(["+", -1, head + j]); j++; }
    }
    for (k = 0; k < tail; k++) ops.push(["=", n - tail + k, m - tail + k]);
    return ops;
  }
  // Writes one side: its unchanged words as text, each run of changed words in one <del>/<ins>.
  function paint(target, parsed, ops, mark, sideIndex, changeOp) {
    target.replaceChildren(document.createTextNode(parsed.lead));
    var run = null, pendingSpace = "";
    ops.forEach(function (op) {
      var index = op[sideIndex];
      if (index < 0) return;
      var unit = parsed.units[index];
      if (op[0] === changeOp) {
        if (run === null) { run = el(mark); target.appendChild(run); }
        else run.appendChild(document.createTextNode(pendingSpace));
        run.appendChild(document.createTextNode(unit.word));
        pendingSpace = unit.space;
        return;
      }
      if (run !== null) { target.appendChild(document.createTextNode(pendingSpace)); run = null; }
      target.appendChild(document.createTextNode(unit.word + unit.space));
    });
    if (run !== null) target.appendChild(document.createTextNode(pendingSpace));
  }
  function showDiff(expected, reply) {
    var left = $("d-expected"), right = $("d-reply"), note = $("d-diffnote");
    note.textContent = "";
    left.textContent = expected;
    if (reply === null || reply === undefined) {
      right.replaceChildren(el("span", "missing", "(no reply)"));
      return;
    }
    var a = units(expected), b = units(reply), ops = diffWords(a.units, b.units);
    if (ops === null) {
      right.textContent = reply;
      note.textContent = "(too long for a word diff: shown unmarked)";
      return;
    }
    paint(left, a, ops, "del", 1, "-");
    paint(right, b, ops, "ins", 2, "+");
  }

  function fact(label, value, node) {
    var box = el("div"), dd = el("dd");
    box.appendChild(el("dt", null, label));
    if (node) dd.appendChild(node); else dd.textContent = value;
    box.appendChild(dd);
    return box;
  }
  function openSample(position) {
    if (position < 0 || position >= state.view.length) return;
    state.open = position;
    var s = state.view[position];
    $("d-title").textContent = s.file + " · row " + s.row;
    var facts = [
      fact("Outcome", null, badge(s.outcome)), fact("Status", s.status), fact("Score", fmt(s.score)),
      fact("Prefix", fmt(s.prefix)), fact("Target ordinal", fmt(s.target_ordinal)),
      fact("Returned ordinal", fmt(s.returned_ordinal)), fact("Returned index", fmt(s.returned_index)),
      fact("Target depth", pct(s.target_depth)), fact("Returned depth", pct(s.returned_depth)),
      fact("Match ratio", fmt(s.match_ratio)),
      fact("Truncated", fmt(s.truncated)), fact("Bin", s.bin), fact("Needles", s.n_needles),
      fact("File", s.file), fact("Row", s.row),
    ];
    $("d-facts").replaceChildren.apply($("d-facts"), facts);
    $("d-error").hidden = !s.error;
    $("d-error").textContent = s.error || "";
    $("d-query").textContent = s.query;
    showDiff(s.expected, s.reply);
    $("d-prev").disabled = position === 0;
    $("d-next").disabled = position >= state.view.length - 1;
    $("detail").hidden = false;
  }
  function closeSample() { $("detail").hidden = true; state.open = -1; }

  ["f-bin", "f-needles", "f-outcome", "f-sort"].forEach(function (id) { $(id).addEventListener("change", applyFilters); });
  ["f-min", "f-max"].forEach(function (id) { $(id).addEventListener("input", applyFilters); });
  $("filters").addEventListener("submit", function (event) { event.preventDefault(); });
  $("f-reset").addEventListener("click", function () { $("filters").reset(); applyFilters(); });
  $("prev").addEventListener("click", function () { if (state.page > 0) { state.page--; renderPage(); } });
  $("next").addEventListener("click", function () { if (state.page < pageCount() - 1) { state.page++; renderPage(); } });
  $("samples").tBodies[0].addEventListener("click", function (event) {
    var tr = event.target.closest("tr");
    if (tr) openSample(Number(tr.dataset.position));
  });
  $("d-close").addEventListener("click", closeSample);
  $("d-prev").addEventListener("click", function () { openSample(state.open - 1); });
  $("d-next").addEventListener("click", function () { openSample(state.open + 1); });
  $("detail").addEventListener("click", function (event) { if (event.target === $("detail")) closeSample(); });
  document.addEventListener("keydown", function (event) {
    if ($("detail").hidden) return;
    if (event.key === "Escape") closeSample();
    else if (event.key === "ArrowLeft") openSample(state.open - 1);
    else if (event.key === "ArrowRight") openSample(state.open + 1);
  });
  applyFilters();
})();
