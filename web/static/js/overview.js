// Overview: the device, the MQTT link and what is serving, from
// /api/v1/overview every 2 s; live uPlot charts of the last 15 minutes from
// /api/v1/telemetry, loaded once whole and then extended with the samples newer
// than the last one shown (the window asked for is the time since the last
// answer, so a throttled background tab catches up without a gap). The range
// picker (history_charts.js) swaps in the history's device points for 1 h
// and 24 h (20 s and 8 min means, asked again every 10 s and 60 s).
"use strict";

(() => {
  const { el, replaceChildren, getJSON, poll, known, number, bytes, duration, stateTag } = window.edgebox;

  const WINDOW_S = 900;
  const POLL_MS = 2000;
  const GIB = 1024 ** 3;
  const CHART_HEIGHT = 160;
  const COLOURS = ["#2f7ed8", "#e4572e", "#29a35a", "#9c27b0", "#f2a541", "#17becf", "#8c564b", "#e377c2"];

  // Each chart: how to read its series out of the samples. Series whose names
  // depend on the machine (thermal zones, power rails) are found in the data.
  const CHARTS = [
    {
      id: "chart-gpu",
      range: [0, 100],
      series: () => [{ label: "GPU load", value: (s) => (s.gpu ? s.gpu.load_pct : null) }],
      missing: (samples) => (samples.length && samples.every((s) => !s.gpu) ? "no GPU" : ""),
    },
    {
      id: "chart-cpu",
      range: [0, 100],
      series: () => [{ label: "CPU", value: (s) => s.cpu_pct }],
    },
    {
      id: "chart-memory",
      series: () => [
        { label: "used", value: (s) => (known(s.memory_used_bytes) ? s.memory_used_bytes / GIB : null) },
        { label: "total", value: (s) => (known(s.memory_total_bytes) ? s.memory_total_bytes / GIB : null), dash: [6, 4] },
      ],
    },
    {
      id: "chart-temperatures",
      series: (samples) =>
        namesIn(samples, (s) => s.temperatures_c).map((zone) => ({
          label: zone,
          value: (s) => (s.temperatures_c ? valueOr(s.temperatures_c[zone]) : null),
        })),
      missing: (samples) => (samples.length && !namesIn(samples, (s) => s.temperatures_c).length ? "no thermal sensors" : ""),
    },
    {
      id: "chart-power",
      series: (samples) => [
        ...(samples.some((s) => known(s.total_power_mw))
          ? [{ label: "total", value: (s) => (known(s.total_power_mw) ? s.total_power_mw / 1000 : null) }]
          : []),
        ...namesIn(samples, (s) => s.power).map((rail) => ({
          label: rail,
          value: (s) => {
            const reading = s.power ? s.power[rail] : null;
            return reading && known(reading.power_mw) ? reading.power_mw / 1000 : null;
          },
        })),
      ],
      missing: (samples) => (samples.length && !samples.some((s) => known(s.total_power_mw) || (s.power && Object.keys(s.power).length)) ? "no power sensors" : ""),
    },
  ];

  const valueOr = (value) => (known(value) ? value : null);
  const clockOf = (epochSeconds) => new Date(epochSeconds * 1000).toLocaleTimeString([], { hour12: false });

  function namesIn(samples, pick) {
    const names = new Set();
    for (const sample of samples) for (const name of Object.keys(pick(sample) || {})) names.add(name);
    return [...names].sort();
  }

  let samples = [];
  let lastPollAt = 0;
  const H = window.edgeboxHistory;
  let range = H.initialRange();
  let windowS = H.SPAN_S[range];
  let historyFetchedAt = -Infinity;
  const plots = new Map();

  // The card's width, whatever the screen: a phone's is narrower than any
  // fixed minimum would allow without the page scrolling sideways.
  function chartWidth(container) {
    return Math.max(120, container.clientWidth);
  }

  // uPlot draws on a canvas, which CSS does not reach: the axes take the
  // page's colours (light or dark, edgebox.css) when a chart is made.
  function axisColours() {
    const style = getComputedStyle(document.documentElement);
    const ink = style.getPropertyValue("--subtle").trim() || "#66717d";
    const line = style.getPropertyValue("--line").trim() || "#dde2e7";
    return { stroke: ink, grid: { stroke: line }, ticks: { stroke: line } };
  }

  function draw() {
    for (const chart of CHARTS) {
      const card = document.getElementById(chart.id);
      const container = card.querySelector(".chart");
      const note = card.querySelector(".chart-note");
      const missing = chart.missing ? chart.missing(samples) : "";
      note.textContent = missing;
      note.classList.toggle("hidden", !missing);
      card.classList.toggle("chart-missing", Boolean(missing));
      const series = chart.series(samples);
      const data = [samples.map((s) => s.timestamp), ...series.map((line) => samples.map((s) => valueOr(line.value(s))))];
      const key = series.map((line) => line.label).join("\u0000");
      let entry = plots.get(chart.id);
      if (entry && entry.key !== key) {
        entry.plot.destroy();
        plots.delete(chart.id);
        entry = null;
      }
      if (!entry) {
        const plot = new window.uPlot(
          {
            width: chartWidth(container),
            height: CHART_HEIGHT,
            cursor: { drag: { x: false, y: false } },
            scales: {
              // What there is, at least a minute, at most the window: the chart
              // fills up over the first 15 minutes, then scrolls.
              x: {
                time: true,
                range: (u, min, max) => (range === "15m" ? [Math.min(Math.max(min, max - windowS), max - 60), max] : [max - windowS, max]),
              },
              y: chart.range ? { range: chart.range } : { auto: true },
            },
            series: [
              { value: (u, v) => (known(v) ? clockOf(v) : "–") },
              ...series.map((line, index) => ({
                label: line.label,
                stroke: COLOURS[index % COLOURS.length],
                width: 2,
                dash: line.dash,
                spanGaps: false,
                // Dots only while a tier has few points (just after a start).
                points: { show: () => range !== "15m" && samples.length < 40 },
                value: (u, v) => number(v),
              })),
            ],
            axes: [
              { values: (u, splits) => splits.map(clockOf), ...axisColours() },
              { size: 50, ...axisColours() },
            ],
            legend: { live: true },
          },
          data,
          container,
        );
        entry = { plot, key };
        plots.set(chart.id, entry);
      } else {
        entry.plot.setData(data);
      }
      container.dataset.points = String(samples.length);
    }
  }

  function addSamples(fresh) {
    const last = samples.length ? samples[samples.length - 1].timestamp : -Infinity;
    const newer = fresh.filter((sample) => sample.timestamp > last);
    if (!newer.length && samples.length) return false;
    samples = samples.concat(newer);
    const oldest = samples[samples.length - 1].timestamp - windowS;
    const firstKept = samples.findIndex((sample) => sample.timestamp >= oldest);
    if (firstKept > 0) samples = samples.slice(firstKept);
    return true;
  }

  async function pollTelemetry() {
    if (range !== "15m") return pollDeviceHistory();
    const asked = range;
    const now = performance.now();
    const since = lastPollAt ? Math.ceil((now - lastPollAt) / 1000) + 5 : WINDOW_S;
    const answer = await getJSON(`/api/v1/telemetry?seconds=${Math.min(WINDOW_S, since)}`);
    if (asked !== range) return;
    lastPollAt = now;
    if (addSamples(answer.samples || []) || !plots.size) draw();
  }

  // The history's device series as the samples the charts read (a null
  // sample where points are missing, so lines break there).
  function samplesFromHistory(answer) {
    const device = answer.device || { timestamps: [], values: {} };
    const value = (name, i) => (device.values[name] ? device.values[name][i] : null);
    const named = (prefix, i, make) => {
      const found = {};
      for (const name of Object.keys(device.values)) {
        if (name.startsWith(prefix) && known(value(name, i))) found[name.slice(prefix.length)] = make(value(name, i));
      }
      return found;
    };
    const step = answer.step_s || 20;
    const made = [];
    device.timestamps.forEach((timestamp, i) => {
      const previous = made.length ? made[made.length - 1].timestamp : null;
      if (previous !== null && timestamp - previous > step * 2.5) made.push({ timestamp: previous + step });
      made.push({
        timestamp,
        cpu_pct: value("cpu_pct", i),
        gpu: known(value("gpu_load_pct", i)) ? { load_pct: value("gpu_load_pct", i) } : null,
        memory_used_bytes: value("memory_used_bytes", i),
        memory_total_bytes: value("memory_total_bytes", i),
        total_power_mw: value("total_power_mw", i),
        temperatures_c: named("temperature_c.", i, (v) => v),
        power: named("power_mw.", i, (v) => ({ power_mw: v })),
      });
    });
    return made;
  }

  async function pollDeviceHistory() {
    const asked = range;
    const now = performance.now();
    if (now - historyFetchedAt < (asked === "24h" ? 60000 : 10000)) return;
    historyFetchedAt = now;
    const answer = await getJSON(H.historyUrl({ series: "device", range: asked }));
    if (asked !== range) return;
    samples = samplesFromHistory(answer);
    draw();
  }

  function chooseRange(chosen) {
    range = chosen;
    windowS = H.SPAN_S[chosen];
    samples = [];
    lastPollAt = 0;
    historyFetchedAt = -Infinity;
    document.getElementById("telemetry-csv").href = H.historyUrl({ series: "device", range }, "csv");
    H.rememberInUrl({ range });
    pollTelemetry().catch((error) => window.edgebox.showConnection(`Telemetry: ${error.message}`));
  }

  function facts(list, rows) {
    replaceChildren(
      list,
      rows.flatMap(([term, value, id]) => [el("dt", {}, [term]), el("dd", { id }, [value])]),
    );
  }

  function showDevice(device, telemetry) {
    const d = device || {};
    const t = telemetry || {};
    const gpu = !telemetry ? "–" : t.gpu ? `${number(t.gpu.load_pct, 0)} %${known(t.gpu.freq_mhz) ? ` at ${number(t.gpu.freq_mhz, 0)} MHz` : ""}` : "no GPU";
    facts(document.getElementById("device-facts"), [
      ["Module", d.model || "–", "device-model"],
      ["Host", d.hostname || "–"],
      ["L4T / JetPack", `${d.l4t || "–"} / ${d.jetpack || "–"}`],
      ["Power mode", d.power_mode || t.nvpmodel || "–"],
      ["Uptime", duration(d.uptime_s)],
      ["edgebox", d.edgebox_version || "–"],
      ["GPU", gpu, "device-gpu"],
      ["Memory", telemetry ? `${bytes(t.memory_used_bytes)} of ${bytes(t.memory_total_bytes)}` : "–"],
      ["Power", telemetry && known(t.total_power_mw) ? `${number(t.total_power_mw / 1000, 2)} W` : "–"],
    ]);
  }

  // Drops are counted per kind of message (results, events, status).
  function dropped(value) {
    if (!known(value)) return "–";
    if (typeof value !== "object") return String(value);
    const kinds = Object.entries(value).filter(([, count]) => count);
    return kinds.length ? kinds.map(([kind, count]) => `${count} ${kind}`).join(", ") : "0";
  }

  function showMqtt(mqtt) {
    const list = document.getElementById("mqtt-facts");
    if (!mqtt) {
      facts(list, [
        ["State", stateTag("off"), "mqtt-state"],
        ["Turn on", "set mqtt: url: in the config (docs/mqtt.md)"],
      ]);
      return;
    }
    facts(list, [
      ["State", stateTag(mqtt.state), "mqtt-state"],
      ["Broker", mqtt.broker || "–"],
      ["Spool", `${mqtt.spool_rows ?? "–"} rows, ${bytes(mqtt.spool_bytes)}`, "mqtt-spool"],
      ["Sent / acked", `${mqtt.sent ?? "–"} / ${mqtt.acknowledged ?? "–"}`],
      ["Dropped", dropped(mqtt.dropped), "mqtt-dropped"],
      ["Oldest unsent", known(mqtt.oldest_unsent_age_s) ? duration(mqtt.oldest_unsent_age_s) : "none"],
      ...(mqtt.degraded ? [["Degraded", String(mqtt.degraded), "mqtt-degraded"]] : []),
    ]);
  }

  async function pollOverview() {
    const overview = await getJSON("/api/v1/overview");
    showDevice(overview.device, overview.telemetry);
    showMqtt(overview.mqtt);
    const models = overview.models || {};
    document.getElementById("models-count").textContent = `${models.ready ?? "–"} / ${models.total ?? "–"}`;
    document.getElementById("streams-count").textContent = String(overview.streams ?? "–");
  }

  // The model names under the counts come from /api/v1/models, refreshed
  // less often: the overview answer carries only the counts.
  async function pollModelNames() {
    const answer = await getJSON("/api/v1/models");
    replaceChildren(
      document.getElementById("model-names"),
      (answer.models || []).map((model) => {
        const ready = (model.versions || []).some((version) => version.state === "READY");
        return el("li", { dataset: { model: model.name } }, [
          el("a", { href: "/models" }, [model.name]), " ", stateTag(ready ? "READY" : (model.versions || [])[0]?.state || "UNAVAILABLE"),
        ]);
      }),
    );
  }

  function resize() {
    for (const chart of CHARTS) {
      const entry = plots.get(chart.id);
      if (!entry) continue;
      const container = document.getElementById(chart.id).querySelector(".chart");
      entry.plot.setSize({ width: chartWidth(container), height: CHART_HEIGHT });
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    H.rangePicker(document.getElementById("range-picker"), range, chooseRange);
    document.getElementById("telemetry-csv").href = H.historyUrl({ series: "device", range }, "csv");
    poll(pollOverview, POLL_MS);
    poll(pollTelemetry, POLL_MS);
    poll(pollModelNames, 5000);
    let pending = null;
    window.addEventListener("resize", () => {
      window.clearTimeout(pending);
      pending = window.setTimeout(resize, 150);
    });
  });
})();
