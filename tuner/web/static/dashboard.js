// What htmx alone does not cover on the dashboard: the connection state, the charts, sorting
// the layer table, and timing figures the browser tests read (window.tunerStats).
(function () {
  "use strict";
  const MAX_POINTS = 600; // the charts keep the newest points; nothing is averaged
  const live = document.getElementById("live");
  const connection = document.getElementById("connection");
  const changeInfo = document.getElementById("change-info");
  const stats = (window.tunerStats = { messages: 0, swapMs: [], latencyMs: [] });

  // -- connection --------------------------------------------------------------------
  function connected(up) {
    connection.textContent = up ? "connected" : "disconnected, reconnecting";
    connection.className = up ? "up" : "down";
  }
  live.addEventListener("htmx:wsOpen", () => connected(true));
  live.addEventListener("htmx:wsClose", () => connected(false));
  live.addEventListener("htmx:wsError", () => connected(false));

  // -- charts --------------------------------------------------------------------------
  let changes = [];
  let changesText = "";
  const xs = [];
  const charts = Array.from(document.querySelectorAll("figure.chart")).map((figure) => {
    const ys = [];
    const plot = new uPlot({
      width: figure.clientWidth || 360,
      height: 150,
      title: `${figure.dataset.title} (${figure.dataset.unit})`,
      scales: { x: { time: false } },
      legend: { show: false },
      series: [{ label: "tokens" }, { label: figure.dataset.title, stroke: "#2563eb", width: 1.5 }],
      axes: [{ label: "tokens" }, { size: 60, values: (u, ticks) => ticks.map(short) }],
      plugins: [changeMarkers()],
    }, [xs, ys], figure);
    return { key: figure.dataset.key, ys, plot };
  });

  // Axis ticks only: 2500000 -> 2.5M. Plotted values are the snapshot's own.
  function short(v) {
    if (v == null) return "";
    for (const [scale, suffix] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
      if (Math.abs(v) >= scale) return `${+(v / scale).toFixed(2)}${suffix}`;
    }
    return `${+v.toFixed(3)}`;
  }

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

  function addPoint(point) {
    if (xs.length && point.tokens < xs[xs.length - 1]) {
      // The counters were reset: a new run starts on the same axes.
      xs.length = 0;
      charts.forEach((c) => (c.ys.length = 0));
    }
    if (xs.length && point.tokens === xs[xs.length - 1]) return; // no token since (paused)
    xs.push(point.tokens);
    charts.forEach((c) => c.ys.push(point[c.key]));
    if (xs.length > MAX_POINTS) {
      xs.shift();
      charts.forEach((c) => c.ys.shift());
    }
    charts.forEach((c) => c.plot.setData([xs, c.ys]));
  }

  // -- layer table sorting ---------------------------------------------------------------
  const table = document.getElementById("layers");
  let sortCol = null;
  let sortDir = -1;
  const UNITS = { KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30 };

  function cellValue(row) {
    if (sortCol === "layer") return Number(row.dataset.layer);
    const text = row.querySelector(`td[data-col="${sortCol}"]`).textContent;
    const [num, unit] = text.split(" ");
    const value = Number(num);
    return Number.isNaN(value) ? -Infinity : value * (UNITS[unit] || 1);
  }

  function sortRows() {
    if (!sortCol) return;
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    const sorted = rows.slice().sort((a, b) =>
      (cellValue(a) - cellValue(b)) * sortDir || a.dataset.layer - b.dataset.layer);
    if (sorted.some((row, i) => row !== rows[i])) sorted.forEach((row) => body.appendChild(row));
  }

  table.tHead.addEventListener("click", (event) => {
    const th = event.target.closest("th");
    if (!th) return;
    sortDir = sortCol === th.dataset.col ? -sortDir : -1;
    sortCol = th.dataset.col;
    table.tHead.querySelectorAll("th").forEach((h) => h.removeAttribute("aria-sort"));
    th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
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
