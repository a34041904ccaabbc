// History: one model's versions over the last 15 min, 1 h or 24 h, from
// /api/v1/history?model=NAME&range=R, asked again every few seconds (at most
// once per step of the range's tier: 5 s, 20 s, 8 min). The model comes from
// ?model= (the models page links here) or is the first one listed; the
// choice of model and range stays in the address. "Download CSV" fetches the
// same query as CSV: exactly the values drawn.
"use strict";

(() => {
  const { el, getJSON, poll, known, showConnection } = window.edgebox;
  const H = window.edgeboxHistory;

  const POLL_MS = 2000;
  const MS = (v) => (known(v) ? v / 1000 : null);

  // Each chart: its lines per version, from the API's named columns.
  const CHARTS = [
    { id: "chart-requests", lines: (v) => [{ label: `v${v}`, column: "requests_per_s", digits: 2 }] },
    {
      id: "chart-latency",
      lines: (v) => [
        { label: `v${v} p50`, column: "p50_us", scale: MS, digits: 2 },
        { label: `v${v} p99`, column: "p99_us", scale: MS, digits: 2, dash: [6, 4] },
      ],
    },
    { id: "chart-queue", lines: (v) => [{ label: `v${v}`, column: "mean_queue_us", scale: MS, digits: 3 }] },
    { id: "chart-failures", lines: (v) => [{ label: `v${v}`, column: "failures_per_s", digits: 2 }] },
    { id: "chart-batch", lines: (v) => [{ label: `v${v}`, column: "mean_batch_size", digits: 2 }] },
  ];

  const charts = new H.Charts();
  let range = H.initialRange();
  let model = H.queryValue("model") || "";
  let fetchedAt = -Infinity;
  let stepS = 5;
  let listedKey = "";

  function note(text) {
    const p = document.getElementById("history-note");
    p.textContent = text || "";
    p.classList.toggle("hidden", !text);
  }

  function draw(answer) {
    const versions = answer.models || [];
    stepS = answer.step_s || stepS;
    note(versions.length ? "" : `No history of '${model}' yet: points come every ${stepS} s while it is served.`);
    CHARTS.forEach((chart) => {
      const lines = [];
      versions.forEach((series, index) => {
        for (const line of chart.lines(series.version)) {
          const raw = series.values[line.column] || [];
          lines.push({
            ...line,
            colour: H.COLOURS[index % H.COLOURS.length],
            timestamps: series.timestamps,
            values: line.scale ? raw.map(line.scale) : raw,
          });
        }
      });
      const container = document.getElementById(chart.id).querySelector(".chart");
      charts.show(chart.id, container, lines, H.joined(lines, stepS), H.SPAN_S[range]);
    });
  }

  function updateLinks() {
    const params = { range, model };
    document.getElementById("history-csv").href = H.historyUrl(params, "csv");
    H.rememberInUrl(params);
  }

  async function listModels() {
    const answer = await getJSON("/api/v1/models");
    const names = (answer.models || []).map((m) => m.name);
    if (model && !names.includes(model)) names.unshift(model);
    if (!model && names.length) {
      model = names[0];
      updateLinks();
    }
    const key = names.join("\u0000");
    if (key === listedKey) return;
    listedKey = key;
    const select = document.getElementById("history-model");
    select.replaceChildren(...names.map((name) => el("option", { value: name, selected: name === model }, [name])));
  }

  async function refresh(force = false) {
    if (!listedKey) await listModels();
    if (!model) {
      note("No models in the repository.");
      return;
    }
    const now = performance.now();
    if (!force && now - fetchedAt < Math.min(stepS, 30) * 1000) return;
    fetchedAt = now;
    draw(await getJSON(H.historyUrl({ range, model })));
  }

  const shown = (error) => showConnection(`History: ${error.message}`);

  document.addEventListener("DOMContentLoaded", () => {
    H.rangePicker(document.getElementById("range-picker"), range, (chosen) => {
      range = chosen;
      updateLinks();
      refresh(true).catch(shown);
    });
    document.getElementById("history-model").addEventListener("change", (event) => {
      model = event.target.value;
      updateLinks();
      refresh(true).catch(shown);
    });
    updateLinks();
    poll(() => refresh(false), POLL_MS);
    poll(listModels, 15000);
    H.onResize(() => charts.resize());
  });
})();
