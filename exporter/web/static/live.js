// Ridgeline's live page: polls /live.json (GET /classify's answer plus a roofline SVG per card,
// drawn by the server) and redraws the charts and the table. Served by the exporter itself under a
// Content-Security-Policy of 'self': no inline script or style, nothing from anywhere else.
"use strict";

(function () {
  // Each regime's word, glyph and sort order come from /live.json's `regimes` (the package's
  // table, exporter/view/units.py); their colours from /static/regimes.css, generated from it.
  let regimeLooks = new Map();
  let regimeOrder = [];
  const SHORT_LEVER = 48;
  const PREFIXES = [[1e18, "E"], [1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];

  const state = {
    paused: false,
    timer: null,
    sort: { key: "gpu", direction: 1 },
    data: null,
    regimes: new Map(),
    openLevers: new Set(),
    failingSince: null,
    lastStatus: "",
  };

  // location.origin carries no user:password@, so this works on a page opened with credentials
  // in its address (fetch refuses URLs that contain them).
  function api(path) {
    return new URL(path, window.location.origin).href;
  }

  function $(id) {
    return document.getElementById(id);
  }

  function isNumber(value) {
    return typeof value === "number" && Number.isFinite(value);
  }

  function significant(value, digits) {
    if (value === 0) return "0";
    const text = Number(value.toPrecision(digits));
    return String(text);
  }

  function si(value, unit) {
    if (!isNumber(value)) return "–";
    const magnitude = Math.abs(value);
    for (const [scale, prefix] of PREFIXES) {
      if (magnitude >= scale * 0.9995) return `${significant(value / scale, 3)} ${prefix}${unit || ""}`.trim();
    }
    return `${significant(value, 3)} ${unit || ""}`.trim();
  }

  function percent(ratio) {
    return isNumber(ratio) ? `${Math.round(ratio * 100)}%` : "–";
  }

  function regimeWord(regime) {
    if (regime === null || regime === undefined) return "no reading";
    const look = regimeLooks.get(regime);
    return look ? look.word : String(regime).replace(/_/g, "-");
  }

  function gpuKey(gpu) {
    return gpu.gpu_instance === null || gpu.gpu_instance === undefined
      ? String(gpu.gpu)
      : `${gpu.gpu}/${gpu.gpu_instance}`;
  }

  // The ridge of the wall the verdict measures the GPU against: its own (its compute roof, the
  // ceiling of its mix of pipes, over the bandwidth: GET /classify's own_ridge_flop_per_byte).
  function ridge(gpu) {
    if (isNumber(gpu.own_ridge_flop_per_byte)) return gpu.own_ridge_flop_per_byte;
    return isNumber(gpu.ridge_flop_per_byte) ? gpu.ridge_flop_per_byte : null;
  }

  // The lever's gist for the table (its first clause, without the regime the row already names);
  // the whole sentence is one click away. exporter/view/units.py's short_lever is the same rule.
  function shortLever(text) {
    let gist = text.split(" — ")[0];
    const colon = gist.indexOf(": ");
    if (colon >= 0) gist = gist.slice(colon + 2);
    if (gist.length > SHORT_LEVER) {
      const cut = gist.lastIndexOf(" ", SHORT_LEVER - 1);
      gist = `${gist.slice(0, cut > 0 ? cut : SHORT_LEVER - 1)}…`;
    }
    return gist;
  }

  function position(gpu) {
    if (isNumber(gpu.position)) return gpu.position;
    const r = ridge(gpu);
    return isNumber(gpu.intensity_flop_per_byte) && r ? gpu.intensity_flop_per_byte / r : null;
  }

  const SORT_VALUES = {
    gpu: (g) => [g.gpu, g.gpu_instance === null || g.gpu_instance === undefined ? -1 : g.gpu_instance],
    card: (g) => g.card || "",
    pod: (g) => (g.attribution && g.attribution.pod) || "",
    regime: (g) => {
      const i = regimeOrder.indexOf(g.regime);
      return i < 0 ? regimeOrder.length : i;
    },
    dram: (g) => g.dram_active,
    tensor: (g) => g.tensor_active,
    flop: (g) => g.flop_utilization,
    position: (g) => position(g),
    efficiency: (g) => g.roofline_efficiency,
  };

  function compare(a, b) {
    const missingA = a === null || a === undefined;
    const missingB = b === null || b === undefined;
    if (missingA || missingB) return missingA === missingB ? 0 : missingA ? 1 : -1;
    if (Array.isArray(a)) {
      for (let i = 0; i < a.length; i += 1) {
        const c = compare(a[i], b[i]);
        if (c !== 0) return c;
      }
      return 0;
    }
    if (typeof a === "string") return a.localeCompare(b);
    return a < b ? -1 : a > b ? 1 : 0;
  }

  function sortedGpus(gpus) {
    const value = SORT_VALUES[state.sort.key] || SORT_VALUES.gpu;
    const byGpu = SORT_VALUES.gpu;
    return gpus.slice().sort((a, b) => {
      const va = value(a);
      const vb = value(b);
      const missing = (va === null || va === undefined) - (vb === null || vb === undefined);
      if (missing !== 0) return missing; // no value sorts last either way
      return state.sort.direction * compare(va, vb) || compare(byGpu(a), byGpu(b));
    });
  }

  function cell(row, text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function renderTable(gpus) {
    const body = document.querySelector("#gpus tbody");
    const rows = [];
    for (const gpu of sortedGpus(gpus)) {
      const row = document.createElement("tr");
      row.dataset.gpu = gpuKey(gpu);
      row.dataset.regime = gpu.regime || "";
      const th = document.createElement("th");
      th.scope = "row";
      th.textContent = gpuKey(gpu);
      row.appendChild(th);
      cell(row, gpu.card || "–", "card");
      cell(row, (gpu.attribution && gpu.attribution.pod) || "–", "pod");
      const regimeCell = cell(row, "", "regime");
      const look = regimeLooks.get(gpu.regime);
      const mark = document.createElement("span");
      mark.className = `mark regime-${look ? gpu.regime : "other"}`;
      mark.setAttribute("aria-hidden", "true");
      mark.textContent = look ? look.glyph : (regimeLooks.get("unknown") || { glyph: "✕" }).glyph;
      regimeCell.appendChild(mark);
      regimeCell.appendChild(document.createTextNode(` ${regimeWord(gpu.regime)}`));
      if (gpu.reduced_clock) {
        // a reduced clock: its cause in words, the clock and what the full clock gives back in the tooltip
        const slow = document.createElement("abbr");
        slow.className = "reduced-clock";
        slow.title = gpu.reduced_clock.note;
        slow.textContent = `↓ ${gpu.reduced_clock.cause_text}`;
        regimeCell.append(" ", slow);
      }
      if (gpu.reading && gpu.reading !== "ok") {
        const why = document.createElement("span");
        why.className = "muted reading";
        why.textContent = ` (${gpu.no_verdict_reason || gpu.reading})`;
        regimeCell.appendChild(why);
      }
      cell(row, percent(gpu.dram_active), "num");
      cell(row, percent(gpu.tensor_active), "num");
      cell(row, percent(gpu.flop_utilization), "num");
      const where = position(gpu);
      const against = cell(
        row,
        isNumber(gpu.intensity_flop_per_byte)
          ? `${si(gpu.intensity_flop_per_byte)} / ${si(ridge(gpu))} (${si(where)}×)`
          : "–",
        "num",
      );
      if (gpu.ridge_note && isNumber(gpu.intensity_flop_per_byte)) {
        // its own ridge, not the one the chart marks: a word, and why in the tooltip
        const own = document.createElement("abbr");
        own.className = "own-ridge";
        own.title = gpu.ridge_note;
        own.textContent = "own";
        against.append(" ", own);
      }
      cell(row, percent(gpu.roofline_efficiency), "num");
      const lever = cell(row, "", "lever");
      if (gpu.lever) {
        const details = document.createElement("details");
        const summary = document.createElement("summary");
        summary.textContent = shortLever(gpu.lever);
        details.title = gpu.lever;
        details.append(summary, document.createTextNode(gpu.lever));
        const key = gpuKey(gpu);
        details.open = state.openLevers.has(key); // the table is redrawn every poll: keep it open
        details.addEventListener("toggle", () => {
          if (details.open) state.openLevers.add(key);
          else state.openLevers.delete(key);
        });
        lever.appendChild(details);
      } else {
        lever.textContent = "–";
      }
      rows.push(row);
    }
    body.replaceChildren(...rows);
    for (const th of document.querySelectorAll("#gpus th[data-sort]")) {
      if (th.dataset.sort === state.sort.key) {
        th.setAttribute("aria-sort", state.sort.direction > 0 ? "ascending" : "descending");
      } else {
        th.removeAttribute("aria-sort");
      }
    }
  }

  function renderCharts(charts, unplaced) {
    const holder = $("charts");
    const wanted = new Set(charts.map((c) => `chart-${c.key}`));
    for (const figure of Array.from(holder.children)) {
      if (!wanted.has(figure.id)) figure.remove();
    }
    for (const chart of charts) {
      const id = `chart-${chart.key}`;
      let figure = document.getElementById(id);
      if (!figure) {
        figure = document.createElement("figure");
        figure.id = id;
        figure.className = "chart";
        const caption = document.createElement("figcaption");
        const art = document.createElement("div");
        art.className = "chart-art";
        const off = document.createElement("p");
        off.className = "off-chart muted";
        figure.append(caption, art, off);
        holder.appendChild(figure);
      }
      const [caption, art, off] = figure.children;
      caption.textContent = chart.title;
      if (art.dataset.svg !== chart.svg) {
        art.innerHTML = chart.svg; // drawn by this server from escaped text: see exporter/view
        art.dataset.svg = chart.svg;
      }
      off.textContent = chart.off_chart.length
        ? "Not on the chart: " + chart.off_chart.map((o) => `GPU ${o.gpu} (${o.reason})`).join(", ") + "."
        : "";
    }
    const none = $("unplaced");
    none.textContent = unplaced.length
      ? "No roofline for: " + unplaced.map((u) => `GPU ${u.gpu} (${u.reason})`).join(", ") + "."
      : charts.length
        ? ""
        : "No GPU on this node yet.";
  }

  function announceChanges(gpus) {
    const changes = [];
    for (const gpu of gpus) {
      const key = gpuKey(gpu);
      const before = state.regimes.get(key);
      if (before !== undefined && before !== gpu.regime) {
        changes.push(`GPU ${key} is now ${regimeWord(gpu.regime)}`);
      }
      state.regimes.set(key, gpu.regime);
    }
    if (changes.length) $("announce").textContent = changes.join(". ") + ".";
  }

  function setStatus(text, warn) {
    if (text !== state.lastStatus) {
      // role=status: screen readers read it when it changes, so it changes only with the state
      $("status").textContent = text;
      state.lastStatus = text;
    }
    $("status").classList.toggle("warn", Boolean(warn));
  }

  function render(data) {
    state.data = data;
    if (Array.isArray(data.regimes)) {
      regimeLooks = new Map(data.regimes.map((r) => [r.regime, r]));
      regimeOrder = data.regimes.map((r) => r.regime);
    }
    document.body.classList.remove("stale");
    const gpuCount = data.gpus.length;
    const source = `source ${data.source} ${data.source_up ? "up" : "down"}`;
    setStatus(
      data.ready ? `${gpuCount} GPU${gpuCount === 1 ? "" : "s"}, ${source}.` : `${gpuCount} GPUs; not ready: ${data.reason}.`,
      !data.ready,
    );
    $("updated").textContent = `Updated ${new Date().toLocaleTimeString()}`;
    renderCharts(data.charts, data.unplaced);
    renderTable(data.gpus);
    announceChanges(data.gpus);
  }

  function failed(error) {
    if (state.failingSince === null) state.failingSince = new Date();
    document.body.classList.add("stale");
    setStatus(
      `The exporter is not answering (${error.message}) since ${state.failingSince.toLocaleTimeString()}; showing the last state.`,
      true,
    );
  }

  function schedule() {
    clearTimeout(state.timer);
    if (state.paused) return;
    const interval = state.data && isNumber(state.data.interval_seconds) ? state.data.interval_seconds : 1;
    state.timer = setTimeout(poll, Math.min(10, Math.max(1, interval)) * 1000);
  }

  async function poll() {
    try {
      const response = await fetch(api("/live.json"), { cache: "no-store", credentials: "same-origin" });
      if (!response.ok) {
        throw new Error(response.status === 404 ? "this server has no live state" : `HTTP ${response.status}`);
      }
      const data = await response.json();
      state.failingSince = null;
      render(data);
    } catch (error) {
      failed(error instanceof Error ? error : new Error(String(error)));
    } finally {
      schedule();
    }
  }

  function start() {
    $("node").textContent = `· ${window.location.host}`;
    document.title = `Ridgeline · ${window.location.host}`;
    $("pause").addEventListener("click", () => {
      state.paused = !state.paused;
      const button = $("pause");
      button.setAttribute("aria-pressed", String(state.paused));
      button.textContent = state.paused ? "Resume updates" : "Pause updates";
      if (state.paused) {
        clearTimeout(state.timer);
        $("updated").textContent += " (paused)";
      } else {
        poll();
      }
    });
    for (const th of document.querySelectorAll("#gpus th[data-sort]")) {
      th.querySelector("button").addEventListener("click", () => {
        const key = th.dataset.sort;
        state.sort = { key, direction: state.sort.key === key ? -state.sort.direction : 1 };
        if (state.data) renderTable(state.data.gpus);
      });
    }
    poll();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
