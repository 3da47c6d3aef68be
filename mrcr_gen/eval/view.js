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
    return String(value);
  }
  // Scores and ratios: three decimals, as every number of the page and its plots.
  function num3(value) { return value === null || value === undefined ? "n/a" : Number(value).toFixed(3); }
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
  fillSelect($("f-ordinal"), Array.from(distinct("target_ordinal").keys()).filter(function (v) { return v !== null; })
    .sort(function (a, b) { return a - b; }));
  var DECILES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  fillSelect($("f-depth"), DECILES, function (d) { return (10 * d) + "–" + (10 * d + 10) + "%"; });
  function decile(depth) { return Math.min(Math.floor(depth * 10), 9); }
  function basename(path) { var parts = String(path).split(/[\\/]/); return parts[parts.length - 1]; }
  function prefixState(s) { return s.prefix === null || s.prefix === undefined ? "none" : s.prefix; }
  samples.forEach(function (s) {
    s._text = [s.file, s.query, s.expected, s.reply || "", s.error || ""].join("\u0000").toLowerCase();
  });

  function bound(input) {
    if (input.value.trim() === "") return null;
    var value = Number(input.value);
    return Number.isFinite(value) ? value : null;
  }
  function byFileRow(a, b) { return (a.file < b.file ? -1 : a.file > b.file ? 1 : 0) || a.row - b.row; }
  var SORT_KEYS = { score: "score", depth: "target_depth", ratio: "match_ratio", length: "context_chars" };
  function byKey(key, direction) {
    // Samples without the value (errors, skipped, rows without their data) go last either way.
    return function (a, b) {
      var x = a[key], y = b[key];
      var noX = x === null || x === undefined, noY = y === null || y === undefined;
      if (noX && noY) return byFileRow(a, b);
      if (noX) return 1;
      if (noY) return -1;
      return direction * (x - y) || byFileRow(a, b);
    };
  }

  function applyFilters() {
    var bin = $("f-bin").value, needles = $("f-needles").value, outcome = $("f-outcome").value;
    var prefix = $("f-prefix").value, truncated = $("f-truncated").value, ordinal = $("f-ordinal").value;
    var depth = $("f-depth").value, search = $("f-search").value.trim().toLowerCase();
    var low = bound($("f-min")), high = bound($("f-max"));
    state.view = samples.filter(function (s) {
      if (search !== "" && s._text.indexOf(search) < 0) return false;
      if (prefix !== "" && prefixState(s) !== prefix) return false;
      if (truncated !== "" && (s.truncated ? "yes" : "no") !== truncated) return false;
      if (ordinal !== "" && String(s.target_ordinal) !== ordinal) return false;
      if (depth !== "" && (s.target_depth === null || String(decile(s.target_depth)) !== depth)) return false;
      if (bin !== "" && s.bin !== bin) return false;
      if (needles !== "" && String(s.n_needles) !== needles) return false;
      if (outcome !== "" && s.outcome !== outcome) return false;
      // A score range keeps only scored samples.
      if ((low !== null || high !== null) && s.score === null) return false;
      if (low !== null && s.score < low) return false;
      if (high !== null && s.score > high) return false;
      return true;
    });
    var sort = $("f-sort").value.split("-");
    state.view.sort(SORT_KEYS[sort[0]] ? byKey(SORT_KEYS[sort[0]], sort[1] === "desc" ? -1 : 1) : byFileRow);
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
      var file = el("td", "file", basename(s.file));
      file.title = s.file;
      tr.appendChild(file);
      tr.appendChild(el("td", "num row", s.row));
      tr.appendChild(el("td", "bin", s.bin));
      tr.appendChild(el("td", "num needles", s.n_needles));
      var outcome = el("td", "outcome");
      outcome.dataset.outcome = s.outcome;
      outcome.appendChild(badge(s.outcome));
      tr.appendChild(outcome);
      tr.appendChild(el("td", "num score", num3(s.score)));
      tr.appendChild(el("td", "prefix", prefixState(s) === "none" ? "–" : s.prefix));
      tr.appendChild(el("td", "num depth", pct(s.target_depth)));
      tr.appendChild(el("td", "num ratio", num3(s.match_ratio)));
      tr.appendChild(el("td", "num length", s.context_chars === null || s.context_chars === undefined
        ? "n/a" : s.context_chars.toLocaleString("en-US")));
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
  // The texts compared after the prefix: the random string is not a word of the writing, and a
  // reply that kept it must not look as though it struck it out.
  function afterPrefix(s) {
    var p = s.prefix_text || "", expected = s.expected, reply = s.reply;
    if (p && expected.indexOf(p) === 0) expected = expected.slice(p.length);
    if (p && reply !== null && reply !== undefined) {
      var at = reply.indexOf(p);
      if (s.prefix === "ok") reply = reply.slice(p.length);
      else if (s.prefix === "late" && at >= 0) {
        reply = s.flags.indexOf("before_prefix") >= 0 ? reply.slice(0, at) : reply.slice(at + p.length);
      }
    }
    return { expected: expected, reply: reply };
  }
  var PREFIX_TEXT = {
    ok: "Prefix kept: the reply starts with the random string.",
    late: "Prefix late: the random string is in the reply but not at its start (the official score is 0).",
    missing: "Prefix missing: the reply does not hold the random string (the official score is 0).",
  };
  function strip(s) {
    var box = $("d-strip");
    box.replaceChildren();
    var depths = s.needle_depths || [];
    $("d-strip-box").hidden = depths.length === 0;
    depths.forEach(function (depth, k) {
      var ordinal = k + 1, asked = ordinal === s.target_ordinal;
      var returned = ordinal === s.returned_ordinal;
      var mark = el("span", "needle" + (asked ? " asked" : "") + (returned ? " returned" : ""), String(ordinal));
      mark.style.left = (100 * depth).toFixed(2) + "%";
      mark.title = "needle " + ordinal + " at " + pct(depth) + (asked ? " (asked)" : "") + (returned ? " (returned)" : "");
      box.appendChild(mark);
    });
    if (s.outcome === "distractor" && s.returned_depth !== null && s.returned_depth !== undefined) {
      var other = el("span", "needle distractor returned", "d");
      other.style.left = (100 * s.returned_depth).toFixed(2) + "%";
      other.title = "the distractor returned, at " + pct(s.returned_depth);
      box.appendChild(other);
    }
  }
  function summaryLine(s) {
    if (s.status === "error") return "Error: the request failed; nothing was graded (counts 0).";
    if (s.status === "skipped") return "Skipped: the row does not fit the model's context window (not sent).";
    var text = "Returned " + s.outcome.replace(/_/g, " ");
    if (s.outcome === "other_needle") text += " (needle " + s.returned_ordinal + " of " + s.n_needles + ", asked " + s.target_ordinal + ")";
    if (s.outcome === "target") text += " (needle " + s.target_ordinal + " of " + s.n_needles + ")";
    if (s.flags && s.flags.length) text += "; " + s.flags.map(function (f) { return f.replace(/_/g, " "); }).join(", ");
    return text + "; score " + num3(s.score) + (s.truncated ? "; truncated at the length limit" : "") + ".";
  }
  function fact(label, value, node) {
    var box = el("div"), dd = el("dd");
    box.appendChild(el("dt", null, label));
    if (node) dd.appendChild(node); else dd.textContent = value;
    box.appendChild(dd);
    return box;
  }
  function facts(s) {
    var list = [fact("Outcome", null, badge(s.outcome)), fact("Status", s.status)];
    if (s.status === "ok") {
      list.push(fact("Score", num3(s.score)), fact("Prefix", fmt(s.prefix)),
        fact("Returned ordinal", fmt(s.returned_ordinal)), fact("Returned index", fmt(s.returned_index)),
        fact("Returned depth", pct(s.returned_depth)), fact("Match", num3(s.match_ratio)),
        fact("Truncated", fmt(s.truncated)), fact("Flags", s.flags && s.flags.length ? s.flags.join(", ") : "none"));
    }
    list.push(fact("Target ordinal", fmt(s.target_ordinal)), fact("Target depth", pct(s.target_depth)),
      fact("Bin", s.bin), fact("Needles", s.n_needles), fact("Length (characters)", fmt(s.context_chars)),
      fact("File", s.file), fact("Row", s.row));
    return list;
  }
  function openSample(position, keepHash) {
    if (position < 0 || position >= state.view.length) return;
    state.open = position;
    var s = state.view[position];
    $("d-title").textContent = basename(s.file) + " · row " + s.row;
    $("d-summary").textContent = summaryLine(s);
    $("d-lost").hidden = !s.context_lost;
    $("d-error").hidden = !s.error;
    $("d-error").textContent = s.error || "";
    strip(s);
    $("d-query").textContent = s.query || "(not available)";
    var replied = s.status === "ok";
    $("d-diffbox").hidden = !replied;
    $("d-legend").hidden = !!s.context_lost;
    if (replied && s.context_lost) {  // nothing to compare with: the reply as it came, unmarked
      $("d-prefix").textContent = PREFIX_TEXT[s.prefix] || "";
      $("d-expected").replaceChildren(el("span", "missing", "(not available: the data file is missing or changed)"));
      $("d-reply").textContent = s.reply === null || s.reply === undefined ? "" : s.reply;
      $("d-diffnote").textContent = "";
    } else if (replied) {
      var texts = afterPrefix(s);
      $("d-prefix").textContent = PREFIX_TEXT[s.prefix] || "";
      showDiff(texts.expected, texts.reply);
    }
    var other = replied && (s.outcome === "other_needle" || s.outcome === "distractor") && s.returned_text;
    $("d-returned-box").hidden = !other;
    if (other) {
      $("d-returned-title").textContent = s.outcome === "other_needle"
        ? "The reply returned needle " + s.returned_ordinal + " instead of needle " + s.target_ordinal
        : "The reply returned a distractor (message " + s.returned_index + ") instead of needle " + s.target_ordinal;
      $("d-expected-plain").textContent = afterPrefix(s).expected;
      $("d-returned").textContent = s.returned_text;
    }
    $("d-facts").replaceChildren.apply($("d-facts"), facts(s));
    $("d-prev").disabled = position === 0;
    $("d-next").disabled = position >= state.view.length - 1;
    $("detail").hidden = false;
    if (!keepHash) history.replaceState(null, "", "#" + encodeURIComponent(s.file) + ":" + s.row);
  }
  function closeSample() {
    $("detail").hidden = true;
    state.open = -1;
    if (location.hash) history.replaceState(null, "", location.pathname + location.search);
  }
  // A deep link #FILE:ROW (the file as the table's tooltip shows it, URL-encoded or not) opens that sample.
  function openLinked() {
    var hash = decodeURIComponent(location.hash.slice(1)), at = hash.lastIndexOf(":");
    if (at < 0) return;
    var file = hash.slice(0, at), row = Number(hash.slice(at + 1));
    var match = function (s) { return s.row === row && (s.file === file || basename(s.file) === file); };
    var position = state.view.findIndex(match);
    if (position < 0 && samples.some(match)) { $("filters").reset(); applyFilters(); position = state.view.findIndex(match); }
    if (position >= 0) { state.page = Math.floor(position / PAGE_SIZE); renderPage(); openSample(position, true); }
  }

  ["f-bin", "f-needles", "f-outcome", "f-prefix", "f-truncated", "f-ordinal", "f-depth", "f-sort"].forEach(function (id) {
    $(id).addEventListener("change", applyFilters);
  });
  ["f-min", "f-max", "f-search"].forEach(function (id) { $(id).addEventListener("input", applyFilters); });
  // A sortable column's header sorts by it, and again the other way.
  $("samples").tHead.addEventListener("click", function (event) {
    var th = event.target.closest("th[data-sort]");
    if (!th) return;
    var key = th.dataset.sort, current = $("f-sort").value;
    $("f-sort").value = key === "file" ? "file" : current === key + "-asc" ? key + "-desc" : key + "-asc";
    applyFilters();
  });
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
  window.addEventListener("hashchange", openLinked);
  applyFilters();
  openLinked();
})();
