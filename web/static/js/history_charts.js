// What the History page and the overview share to show /api/v1/history: the
// time-range picker (15 min / 1 h / 24 h, kept in the page's URL as
// ?range=), the "Download CSV" link's address, series joined on their
// timestamps with a gap wherever points are missing (a version unloaded, the
// daemon stopped), and uPlot charts whose legend shows the values under the
// cursor. docs/dashboard.md, "History".
"use strict";

window.edgeboxHistory = (() => {
  const { el, known, number } = window.edgebox;

  const RANGES = [
    ["15m", "15 min"],
    ["1h", "1 h"],
    ["24h", "24 h"],
  ];
  const SPAN_S = { "15m": 900, "1h": 3600, "24h": 86400 };
  const COLOURS = ["#2f7ed8", "#e4572e", "#29a35a", "#9c27b0", "#f2a541", "#17becf", "#8c564b", "#e377c2"];
  const CHART_HEIGHT = 170;

  function queryValue(name) {
    return new URLSearchParams(window.location.search).get(name);
  }

  // The page's address keeps the choice, so a reload or a shared link shows
  // the same window; nothing is added to the browser's back history.
  function rememberInUrl(values) {
    const params = new URLSearchParams(window.location.search);
    for (const [name, value] of Object.entries(values)) {
      if (known(value) && value !== "") params.set(name, value);
      else params.delete(name);
    }
    const query = params.toString();
    window.history.replaceState(null, "", `${window.location.pathname}${query ? `?${query}` : ""}`);
  }

  function initialRange(fallback = "15m") {
    const asked = queryValue("range");
    return SPAN_S[asked] ? asked : fallback;
  }

  // Three toggle buttons in `container`; `onChange(range)` after a click.
  function rangePicker(container, chosen, onChange) {
    const buttons = RANGES.map(([range, label]) =>
      el("button", {
        type: "button",
        class: "range-button",
        dataset: { range },
        "aria-pressed": range === chosen ? "true" : "false",
        onclick: () => {
          for (const button of buttons) button.setAttribute("aria-pressed", button.dataset.range === range ? "true" : "false");
          onChange(range);
        },
      }, [label]),
    );
    container.replaceChildren(...buttons);
  }

  function historyUrl(params, format) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params)) if (known(value) && value !== "") query.set(name, value);
    if (format) query.set("format", format);
    return `/api/v1/history?${query.toString()}`;
  }

  // [[xs], [ys per line]...]: every line's points placed on the union of the
  // lines' timestamps (null where a line has none), and a null row wherever
  // two timestamps lie more than 2.5 steps apart, so uPlot breaks the line
  // there instead of drawing across the gap.
  function joined(lines, stepS) {
    const times = new Set();
    for (const line of lines) for (const t of line.timestamps) times.add(t);
    const sorted = [...times].sort((a, b) => a - b);
    const xs = [];
    for (let i = 0; i < sorted.length; i += 1) {
      if (i && sorted[i] - sorted[i - 1] > stepS * 2.5) xs.push(sorted[i - 1] + stepS);
      xs.push(sorted[i]);
    }
    const columns = lines.map((line) => {
      const at = new Map(line.timestamps.map((t, i) => [t, line.values[i]]));
      return xs.map((t) => (at.has(t) && known(at.get(t)) ? at.get(t) : null));
    });
    return [xs, ...columns];
  }

  function axisColours() {
    const style = getComputedStyle(document.documentElement);
    const ink = style.getPropertyValue("--subtle").trim() || "#66717d";
    const line = style.getPropertyValue("--line").trim() || "#dde2e7";
    return { stroke: ink, grid: { stroke: line }, ticks: { stroke: line } };
  }

  function timeLabel(epochSeconds, withDate) {
    const date = new Date(epochSeconds * 1000);
    const time = date.toLocaleTimeString([], { hour12: false, hour: "2-digit", minute: "2-digit", second: withDate ? undefined : "2-digit" });
    return withDate ? `${date.toLocaleDateString([], { month: "short", day: "numeric" })} ${time}` : time;
  }

  function clockLabel(epochSeconds, seconds) {
    const options = { hour12: false, hour: "2-digit", minute: "2-digit", second: seconds ? "2-digit" : undefined };
    return new Date(epochSeconds * 1000).toLocaleTimeString([], options);
  }

  // A uPlot chart in `container`, one line per `lines` entry ({label, dash}),
  // the x range the last `spanS` seconds up to the newest point; the legend
  // follows the cursor (values under it), digits per line's `digits`. Points
  // are drawn where uPlot finds room (a tier's first few points are dots).
  function makePlot(container, lines, data, spanS) {
    const longRange = spanS > 3600;
    return new window.uPlot(
      {
        width: Math.max(120, container.clientWidth),
        height: CHART_HEIGHT,
        cursor: { drag: { x: false, y: false } },
        scales: {
          // The whole window, however little of it has points: how far back
          // the record goes is part of the answer.
          x: { time: true, range: (u, min, max) => [max - spanS, max] },
          y: { auto: true, range: (u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] },
        },
        series: [
          { value: (u, v) => (known(v) ? timeLabel(v, longRange) : "–") },
          ...lines.map((line, index) => ({
            label: line.label,
            stroke: line.colour || COLOURS[index % COLOURS.length],
            width: 2,
            dash: line.dash,
            spanGaps: false,
            value: (u, v) => number(v, line.digits ?? 1),
          })),
        ],
        axes: [
          // Seconds only where ticks are less than a minute apart.
          { values: (u, splits, axis, space, incr) => splits.map((v) => clockLabel(v, incr < 60)), ...axisColours() },
          { size: 50, ...axisColours() },
        ],
        legend: { live: true },
      },
      data,
      container,
    );
  }

  // Keeps one plot per chart id, made again only when its lines change.
  class Charts {
    constructor() {
      this.plots = new Map();
    }

    show(id, container, lines, data, spanS) {
      const key = `${spanS}\u0000${lines.map((line) => line.label).join("\u0000")}`;
      let entry = this.plots.get(id);
      if (entry && entry.key !== key) {
        entry.plot.destroy();
        entry = null;
      }
      if (!entry) {
        container.replaceChildren();
        entry = { plot: makePlot(container, lines, data, spanS), key, container };
        this.plots.set(id, entry);
      } else {
        entry.plot.setData(data);
      }
      container.dataset.points = String(data[0].filter((t, i) => data.slice(1).some((ys) => known(ys[i]))).length);
    }

    resize() {
      for (const entry of this.plots.values()) {
        entry.plot.setSize({ width: Math.max(120, entry.container.clientWidth), height: CHART_HEIGHT });
      }
    }
  }

  function onResize(callback) {
    let pending = null;
    window.addEventListener("resize", () => {
      window.clearTimeout(pending);
      pending = window.setTimeout(callback, 150);
    });
  }

  return { RANGES, SPAN_S, COLOURS, queryValue, rememberInUrl, initialRange, rangePicker, historyUrl, joined, Charts, onResize };
})();
