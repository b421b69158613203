// What htmx alone does not cover on the dashboard: the connection state, requests that
// failed, the charts, the experts heat map and the hit curve (fetched from the API), sorting
// the layer table, and timing figures the browser tests read (window.tunerStats).
(function () {
  "use strict";
  const MAX_POINTS = 600; // the charts keep the newest points; nothing is averaged
  const CHART_HEIGHT = 220;
  const live = document.getElementById("live");
  const base = live.dataset.base;
  const connection = document.getElementById("connection");
  const changeInfo = document.getElementById("change-info");
  const requestError = document.getElementById("request-error");
  const stats = (window.tunerStats = { messages: 0, swapMs: [], latencyMs: [] });
  // The page's token, if the server has one, goes on the API requests made here too.
  const headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");

  // -- figures -----------------------------------------------------------------------
  // tuner.format.figure in JavaScript, for figures written here (a browser test checks
  // that both write the same text).
  const BINARY = ["B", "KiB", "MiB", "GiB", "TiB"];
  function figure(value, unit = "") {
    if (value == null) return "-";
    const base = unit.split("/")[0];
    if (base === "bytes") {
      let n = value;
      for (const u of BINARY) {
        if (Math.abs(n) < 1024 || u === "TiB") return u === "B" ? `${n.toFixed(0)} B` : `${n.toFixed(1)} ${u}`;
        n /= 1024;
      }
    }
    if (base === "%") return value.toFixed(1);
    const grouped = (v, digits) => v.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
    if (base === "ms") return grouped(value, 2);
    if (Number.isInteger(value)) return grouped(value, 0);
    if (Math.abs(value) < 1) return String(Number(value.toPrecision(3)));
    return grouped(value, 2);
  }
  window.tunerFigure = figure;

  // Axis ticks only: 2500000 -> 2.5M. Plotted values are the snapshot's own.
  function short(v) {
    if (v == null) return "";
    for (const [scale, suffix] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
      if (Math.abs(v) >= scale) return `${+(v / scale).toFixed(2)}${suffix}`;
    }
    return `${+v.toFixed(3)}`;
  }

  // -- connection and failed requests -------------------------------------------------
  function connected(up) {
    connection.textContent = up ? "connected" : "disconnected, reconnecting";
    connection.className = up ? "up" : "down";
  }
  live.addEventListener("htmx:wsOpen", () => connected(true));
  live.addEventListener("htmx:wsClose", () => connected(false));
  live.addEventListener("htmx:wsError", () => connected(false));

  // A change that never reached the server (or that it failed on) is said where it was
  // made: at the knob's field, else above the page.
  function requestFailed(event, message) {
    const knob = event.detail.elt.closest && event.detail.elt.closest(".knob");
    if (!knob) {
      requestError.textContent = message;
      return;
    }
    let note = knob.querySelector(".error.request");
    if (!note) {
      note = document.createElement("div");
      note.className = "error request";
      note.setAttribute("role", "alert");
      knob.appendChild(note);
    }
    note.textContent = message;
  }
  document.body.addEventListener("htmx:sendError", (event) =>
    requestFailed(event, "not applied: the server did not answer (is tuner serve running?)"));
  document.body.addEventListener("htmx:responseError", (event) => {
    const xhr = event.detail.xhr;
    requestFailed(event, `not applied: HTTP ${xhr.status} ${(xhr.responseText || "").slice(0, 200)}`);
  });
  document.body.addEventListener("htmx:afterRequest", (event) => {
    if (event.detail.successful) requestError.textContent = "";
  });

  // -- charts --------------------------------------------------------------------------
  let changes = [];
  let changesText = "";
  const xs = [];

  // Redraws `plot` at its box's width whenever the box changes size.
  function followWidth(box, plot, height) {
    new ResizeObserver(() => {
      const width = Math.floor(box.clientWidth);
      if (width > 0 && width !== plot.width) plot.setSize({ width, height });
    }).observe(box);
  }

  const charts = Array.from(document.querySelectorAll("#charts figure.chart")).map((figure) => {
    const ys = [];
    const unit = figure.dataset.unit;
    const plot = new uPlot({
      width: figure.clientWidth || 320,
      height: CHART_HEIGHT,
      title: `${figure.dataset.title} (${unit})`,
      scales: { x: { time: false } },
      legend: { show: false },
      series: [{ label: "tokens" }, { label: figure.dataset.title, stroke: "#2563eb", width: 1.5 }],
      axes: [
        { label: "tokens decoded", size: 40, space: 60 },
        { size: 56, space: 22, values: (u, ticks) => ticks.map(short) },
      ],
      plugins: [changeMarkers()],
    }, [xs, ys], figure);
    followWidth(figure, plot, CHART_HEIGHT);
    return { key: figure.dataset.key, ys, plot, note: figure.querySelector(".chart-note") };
  });
  stats.charts = charts.map((c) => c.plot);

  function changeMarkers() {
    return {
      hooks: {
        draw: [(u) => {
          const ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = "#dc2626";
          ctx.setLineDash([4, 3]);
          for (const c of changes) {
            if (c.token < u.scales.x.min || c.token > u.scales.x.max) continue;
            const x = Math.round(u.valToPos(c.token, "x", true));
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
          }
          ctx.restore();
        }],
        setCursor: [(u) => {
          const left = u.cursor.left;
          if (left == null || left < 0) return;
          const near = changes.filter((c) => Math.abs(u.valToPos(c.token, "x") - left) <= 6);
          if (near.length) changeInfo.textContent = near.map(describe).join("  |  ");
        }],
      },
    };
  }

  function describe(change) {
    const what = Object.entries(change.changed)
      .map(([knob, [from, to]]) => `${knob} ${from} -> ${to}`).join(", ");
    return `v${change.version} at token ${change.token}: ${what}` + (change.rebuilt ? " (rebuilt)" : "");
  }

  // A prefetch chart with nothing issued says why it is empty.
  function explainEmpty(chart, point) {
    if (!chart.note) return;
    const empty = point[chart.key] == null;
    chart.note.hidden = !empty;
    if (empty) {
      chart.note.textContent = chart.key.endsWith("usefulness") && point.prefetch === "off"
        ? "prefetch is off: nothing issued to be useful" : "nothing measured in the window";
    }
  }

  function addPoint(point) {
    if (xs.length && point.tokens < xs[xs.length - 1]) {
      // The counters were reset: a new run starts on the same axes.
      xs.length = 0;
      charts.forEach((c) => (c.ys.length = 0));
    }
    charts.forEach((c) => explainEmpty(c, point));
    if (xs.length && point.tokens === xs[xs.length - 1]) return; // no token since (paused)
    xs.push(point.tokens);
    charts.forEach((c) => c.ys.push(point[c.key]));
    if (xs.length > MAX_POINTS) {
      xs.shift();
      charts.forEach((c) => c.ys.shift());
    }
    charts.forEach((c) => c.plot.setData([xs, c.ys]));
  }

  // -- API polling -----------------------------------------------------------------------
  // Asks `path` every `period` ms while the page is visible and connected, one request at
  // a time.
  function poll(path, period, show, failed) {
    let busy = false;
    async function once() {
      if (busy || document.visibilityState !== "visible" || connection.className !== "up") return;
      busy = true;
      try {
        const response = await fetch(`${base}${path()}`, { headers });
        if (!response.ok) failed(`HTTP ${response.status}`);
        else show(response.status === 204 ? null : await response.json());
      } catch (err) {
        failed("the server did not answer");
      } finally {
        busy = false;
      }
    }
    once();
    setInterval(once, period);
    return once;
  }

  // -- experts heat map --------------------------------------------------------------------
  const heatCanvas = document.getElementById("heatmap");
  const heatInfo = document.getElementById("heatmap-info");
  const heatForm = document.getElementById("heatmap-controls");
  const heat = { data: null, hover: null };
  const SHADES = ["#fff7ed", "#ffedd5", "#fed7aa", "#fdba74", "#fb923c", "#f97316", "#ea580c", "#c2410c", "#7c2d12"];

  function heatChoice(name) {
    return new FormData(heatForm).get(name);
  }

  function heatValues(d, metric) {
    if (metric === "resident") return d.resident;
    return d[metric];
  }

  function heatGeometry(d) {
    const width = heatCanvas.clientWidth;
    const cell = Math.max(3, Math.min(14, Math.floor(320 / d.layers)));
    return { cw: width / d.experts, ch: cell, width, height: cell * d.layers };
  }

  function drawHeat() {
    const d = heat.data;
    if (!d) return;
    const metric = heatChoice("heat-metric");
    const values = heatValues(d, metric);
    const g = heatGeometry(d);
    const dpr = window.devicePixelRatio || 1;
    heatCanvas.style.height = `${g.height}px`;
    heatCanvas.width = Math.round(g.width * dpr);
    heatCanvas.height = Math.round(g.height * dpr);
    const ctx = heatCanvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#f3f4f6";
    ctx.fillRect(0, 0, g.width, g.height);
    if (!values) return; // no residency map yet
    const max = Math.max(1, ...values.map((row) => Math.max(...row)));
    for (let l = 0; l < d.layers; l++) {
      for (let e = 0; e < d.experts; e++) {
        const v = values[l][e];
        if (metric === "resident") ctx.fillStyle = v ? "#2563eb" : "#f3f4f6";
        else ctx.fillStyle = v ? SHADES[1 + Math.min(7, Math.floor((v / max) * 8))] : SHADES[0];
        ctx.fillRect(e * g.cw, l * g.ch, Math.ceil(g.cw), g.ch);
      }
    }
    if (heat.hover) {
      const [l, e] = heat.hover;
      ctx.strokeStyle = "#111827";
      ctx.lineWidth = 1.5;
      ctx.strokeRect(e * g.cw + 0.5, l * g.ch + 0.5, Math.max(2, g.cw - 1), g.ch - 1);
    }
    heat.max = max;
  }

  function heatText() {
    const d = heat.data;
    if (!d) return "waiting for the first counts";
    const span = d.view === "window" ? `window of ${figure(d.tokens)} tokens` : `whole run, ${figure(d.tokens)} tokens`;
    const residency = d.resident_at_token == null ? "residency: waiting for the first map"
      : `residency at token ${figure(d.resident_at_token)}`;
    if (!heat.hover) {
      const metric = heatChoice("heat-metric");
      const scale = metric === "resident" ? "blue: resident" : `colour: ${metric === "misses" ? "sync misses" : "routings"}, 0 to ${figure(heat.max)}`;
      return `${span} · ${scale} · ${residency} · hover a cell for its figures`;
    }
    const [l, e] = heat.hover;
    const routed = d.routings[l][e];
    const missed = d.misses[l][e];
    const hit = routed ? figure((100 * (routed - missed)) / routed, "%") : "-";
    const resident = d.resident == null ? "residency not taken yet" : d.resident[l][e] ? "resident" : "not resident";
    return `layer ${l}, expert ${e}: ${figure(routed)} routings, ${figure(missed)} sync misses (hit ${hit} %), ${resident} · ${span}`;
  }

  function showHeat(d) {
    heat.data = d;
    if (heat.hover && (heat.hover[0] >= d.layers || heat.hover[1] >= d.experts)) heat.hover = null;
    drawHeat();
    heatInfo.textContent = heatText();
  }

  const loadExperts = poll(() => `/api/experts?view=${heatChoice("heat-view")}`, 1000, showHeat,
    (why) => (heatInfo.textContent = `no per-expert counts: ${why}`));
  heatForm.addEventListener("change", (event) => {
    if (event.target.name === "heat-view") loadExperts();
    drawHeat();
    heatInfo.textContent = heatText();
  });
  heatCanvas.addEventListener("mousemove", (event) => {
    const d = heat.data;
    if (!d) return;
    const g = heatGeometry(d);
    const rect = heatCanvas.getBoundingClientRect();
    const l = Math.floor((event.clientY - rect.top) / g.ch);
    const e = Math.floor((event.clientX - rect.left) / g.cw);
    heat.hover = l >= 0 && l < d.layers && e >= 0 && e < d.experts ? [l, e] : null;
    drawHeat();
    heatInfo.textContent = heatText();
  });
  heatCanvas.addEventListener("mouseleave", () => {
    heat.hover = null;
    drawHeat();
    heatInfo.textContent = heatText();
  });
  new ResizeObserver(drawHeat).observe(heatCanvas);

  // -- hit rate over arena size ----------------------------------------------------------
  const curveBox = document.getElementById("curve");
  const curveInfo = document.getElementById("curve-info");
  const CURVE_HEIGHT = 230;
  let curveArena = null;
  const curvePlot = new uPlot({
    width: curveBox.clientWidth || 360,
    height: CURVE_HEIGHT,
    scales: { x: { time: false }, y: { range: [0, 100] } },
    legend: { live: true },
    series: [
      { label: "arena slots" },
      { label: "lru", stroke: "#2563eb", width: 1.5, value: (u, v) => figure(v, "%") },
      { label: "2q", stroke: "#16a34a", width: 1.5, value: (u, v) => figure(v, "%") },
      { label: "opt (Belady's bound)", stroke: "#111827", width: 1.5, dash: [6, 4], value: (u, v) => figure(v, "%") },
      { label: "live engine", stroke: "#dc2626", width: 0, paths: () => null, points: { show: true, size: 9, fill: "#dc2626" }, value: (u, v) => figure(v, "%") },
    ],
    axes: [{ label: "arena slots", size: 40 }, { label: "hit rate %", size: 50, space: 22 }],
    plugins: [{
      hooks: {
        draw: [(u) => {
          if (curveArena == null) return;
          const ctx = u.ctx;
          const x = Math.round(u.valToPos(curveArena, "x", true));
          ctx.save();
          ctx.strokeStyle = "#dc2626";
          ctx.setLineDash([3, 3]);
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.restore();
        }],
      },
    }],
  }, [[], [], [], [], []], curveBox);
  followWidth(curveBox, curvePlot, CURVE_HEIGHT);

  function showCurve(c) {
    if (c == null) {
      curveInfo.textContent = "computing the first curve";
      return;
    }
    if (c.error) {
      curveInfo.textContent = `the curve failed: ${c.error}`;
      return;
    }
    curveArena = c.arena;
    const livePoint = c.sizes.map((n) => (n === c.arena ? c.live_hit_rate : null));
    curvePlot.setData([c.sizes, c.hit_rate.lru, c.hit_rate["2q"], c.hit_rate.opt, livePoint]);
    const here = c.at_arena;
    const next = c.next ? ` · ${figure(c.next.added)} more slots (${figure(c.next.slots)}): ${c.next.gain_pp >= 0 ? "+" : ""}${figure(c.next.gain_pp, "%")} pp with ${c.policy}` : "";
    curveInfo.innerHTML = "";
    const line = document.createElement("span");
    const ws = c.working_sets[c.sizes.indexOf(c.arena)];
    line.textContent = `now ${figure(c.arena)} slots (${ws} working set${ws === 1 ? "" : "s"} of ${figure(c.working_set)}), ${c.policy}: live ${figure(c.live_hit_rate, "%")} %, replayed lru ${figure(here.lru, "%")} %, 2q ${figure(here["2q"], "%")} %, bound ${figure(here.opt, "%")} %`;
    const gap = document.createElement("span");
    gap.className = "gap";
    gap.textContent = c.gap_pp == null ? "" : ` · gap to the bound ${figure(c.gap_pp, "%")} pp`;
    const rest = document.createElement("span");
    rest.textContent = `${next} · the window's ${figure(c.tokens)} tokens after ${figure(c.warmup_tokens)} warm-up tokens, at token ${figure(c.at_token)}, replayed in ${figure(c.seconds)} s` +
      (c.notes.length ? ` · note: ${c.notes.join("; ")}` : "");
    curveInfo.append(line, gap, rest);
  }
  poll(() => "/api/curve", 2000, showCurve, (why) => (curveInfo.textContent = `no curve: ${why}`));

  // -- layer table sorting ---------------------------------------------------------------
  const wrap = document.querySelector(".table-wrap");
  let sortCol = null;
  let sortDir = -1;

  function cellValue(row) {
    if (sortCol === "layer") return Number(row.dataset.layer);
    const cell = row.querySelector(`td[data-col="${sortCol}"]`);
    return cell && cell.dataset.v != null ? Number(cell.dataset.v) : -Infinity;
  }

  // The table is swapped whole with every update: the sort is applied again each time.
  function sortRows() {
    const table = document.getElementById("layers");
    table.querySelectorAll("thead th[data-col]").forEach((h) => {
      if (h.dataset.col === sortCol) h.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
      else h.removeAttribute("aria-sort");
    });
    if (!sortCol || !table.tBodies.length) return;
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    const sorted = rows.slice().sort((a, b) =>
      (cellValue(a) - cellValue(b)) * sortDir || a.dataset.layer - b.dataset.layer);
    if (sorted.some((row, i) => row !== rows[i])) sorted.forEach((row) => body.appendChild(row));
  }

  wrap.addEventListener("click", (event) => {
    const th = event.target.closest("thead th[data-col]");
    if (!th) return;
    sortDir = sortCol === th.dataset.col ? -sortDir : -1;
    sortCol = th.dataset.col;
    sortRows();
  });

  // -- each message ------------------------------------------------------------------------
  let arrived = 0;
  live.addEventListener("htmx:wsBeforeMessage", () => (arrived = performance.now()));
  live.addEventListener("htmx:wsAfterMessage", (event) => {
    stats.messages += 1;
    stats.swapMs.push(performance.now() - arrived);
    const text = document.getElementById("chart-changes").dataset.changes;
    if (text && text !== changesText) {
      changesText = text;
      changes = JSON.parse(text);
    }
    const pointText = document.getElementById("chart-point").dataset.point;
    if (pointText) {
      const point = JSON.parse(pointText);
      stats.latencyMs.push(Date.now() - point.sent * 1000);
      addPoint(point);
    }
    sortRows();
    // The server sends the next update only after this: a slow page gets fewer, newer ones.
    event.detail.socketWrapper.send(JSON.stringify({ ready: true }));
  });
})();
