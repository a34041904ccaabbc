// Streams: per stream its state, fps, drops, failures, where a frame's time
// went and the distribution of read-to-result times, from /api/v1/streams every 2 s, and its latest frame (lanes drawn by
// the server) from frame.jpg. Each image asks for the next frame ~500 ms after
// the previous one arrived or failed, so a slow link never queues requests.
"use strict";

(() => {
  const { el, replaceChildren, getJSON, poll, known, number, stateTag } = window.edgebox;
  const health = window.edgeboxStreamHealth;

  const POLL_MS = 2000;
  const FRAME_MS = 500;
  const cards = new Map();

  function frameUrl(name) {
    return `/api/v1/streams/${encodeURIComponent(name)}/frame.jpg?t=${Date.now()}`;
  }

  function startFrames(entry, name) {
    const image = entry.image;
    const next = () => {
      if (!cards.has(name)) return;
      entry.timer = window.setTimeout(() => { image.src = frameUrl(name); }, FRAME_MS);
    };
    image.addEventListener("load", () => {
      entry.frame.classList.remove("no-frame");
      entry.frameNote.textContent = "";
      next();
    });
    image.addEventListener("error", () => {
      entry.frame.classList.add("no-frame");
      entry.frameNote.textContent = "No frame yet.";
      next();
    });
    image.src = frameUrl(name);
  }

  function latency(latencyMs) {
    if (!latencyMs) return el("p", { class: "subtle" }, ["No frame processed yet."]);
    const parts = [
      ["capture", latencyMs.capture_ms],
      ["queue", latencyMs.queue_ms],
      ["inference", latencyMs.inference_ms],
    ];
    const total = known(latencyMs.total_ms) ? latencyMs.total_ms : parts.reduce((sum, [, v]) => sum + (v || 0), 0);
    const bar = el("div", { class: "latency-bar", title: `total ${number(total, 1)} ms` },
      parts.map(([name, value]) => {
        const segment = el("span", { class: `segment segment-${name}` });
        segment.style.flexGrow = String(Math.max(0, value || 0));
        return segment;
      }));
    return el("div", { class: "latency" }, [
      bar,
      el("dl", { class: "facts compact" }, [
        ...parts.flatMap(([name, value]) => [
          el("dt", {}, [el("span", { class: `swatch segment-${name}` }), name]),
          el("dd", { dataset: { latency: name } }, [`${number(value, 1)} ms`]),
        ]),
        el("dt", {}, ["total"]),
        el("dd", { dataset: { latency: "total" } }, [`${number(total, 1)} ms`]),
      ]),
    ]);
  }

  // Read-to-result over the stream's recent results: the tail a control loop
  // feels, as p50/p90/p99/max and a histogram whose bars share one scale.
  function resultLatency(distribution) {
    if (!distribution) return el("p", { class: "subtle" }, ["No result yet."]);
    const buckets = distribution.buckets || [];
    const most = Math.max(1, ...buckets.map(([, count]) => count));
    const label = (bound, index) => {
      if (bound !== null) return `≤ ${number(bound, 0)}`;
      const previous = index > 0 ? buckets[index - 1][0] : 0;
      return `> ${number(previous, 0)}`;
    };
    const shown = buckets.filter(([, count], index) =>
      count > 0 || buckets.slice(0, index).some(([, c]) => c > 0) && buckets.slice(index).some(([, c]) => c > 0));
    return el("div", { class: "result-latency" }, [
      el("dl", { class: "facts compact" }, [
        ...["p50", "p90", "p99", "max"].flatMap((name) => [
          el("dt", {}, [name]),
          el("dd", { dataset: { resultLatency: name } }, [`${number(distribution[`${name}_ms`], 1)} ms`]),
        ]),
        el("dt", {}, ["results"]),
        el("dd", { dataset: { resultLatency: "count" } }, [String(distribution.count)]),
      ]),
      el("table", { class: "histogram" }, [
        el("tbody", {}, shown.map(([bound, count]) => {
          const bar = el("span", { class: "histogram-bar" });
          bar.style.width = `${(100 * count) / most}%`;
          return el("tr", { dataset: { bucket: bound === null ? "inf" : String(bound) } }, [
            el("th", { scope: "row" }, [`${label(bound, buckets.findIndex(([b]) => b === bound))} ms`]),
            el("td", { class: "histogram-cell" }, [bar]),
            el("td", { class: "histogram-count" }, [String(count)]),
          ]);
        })),
      ]),
    ]);
  }

  function streamCard(stream) {
    let entry = cards.get(stream.name);
    if (!entry) {
      const image = el("img", { class: "frame-image", alt: `latest frame of ${stream.name}`, width: "640", height: "360" });
      const frameNote = el("p", { class: "frame-note subtle" }, ["Waiting for a frame…"]);
      const frame = el("figure", { class: "frame no-frame" }, [image, frameNote]);
      const details = el("div", { class: "stream-details" });
      const badge = el("span", { class: "health-badge" });
      const card = el("article", { class: "card stream", id: `stream-${stream.name}`, dataset: { stream: stream.name } }, [
        el("div", { class: "stream-head" }, [el("h2", {}, [stream.name]), badge, health.snapshotLink(stream)]),
        el("div", { class: "stream-body" }, [frame, details]),
      ]);
      entry = { card, image, frame, frameNote, details, badge, history: health.historyPanel(), timer: null };
      cards.set(stream.name, entry);
      startFrames(entry, stream.name);
    }
    replaceChildren(entry.badge, [health.badge(stream)]);
    health.fillHistory(entry.history, stream);
    replaceChildren(entry.details, [
      el("dl", { class: "facts" }, [
        el("dt", {}, ["State"]), el("dd", { class: "stream-state" }, [stateTag(stream.state)]),
        stream.reason ? el("dt", {}, ["Reason"]) : null,
        stream.reason ? el("dd", { class: "reason" }, [stream.reason]) : null,
        el("dt", {}, ["Source"]), el("dd", {}, [stream.source || "–"]),
        el("dt", {}, ["Model"]), el("dd", {}, [`${stream.model || "–"}${known(stream.model_version) ? ` v${stream.model_version}` : ""}`]),
        ...(stream.health ? [] : [
          el("dt", {}, ["FPS"]), el("dd", { class: "fps" }, [number(stream.fps, 1)]),
          el("dt", {}, ["Frames dropped"]), el("dd", { class: "drops" }, [String(stream.frames_dropped ?? "–")]),
        ]),
        el("dt", {}, ["Inference failures"]), el("dd", {}, [String(stream.inference_failures ?? "–")]),
        ...health.facts(stream),
      ].filter(Boolean)),
      entry.history.panel,
      el("h3", {}, ["Latency per frame"]),
      latency(stream.latency),
      el("h3", {}, ["Read to result, recent frames"]),
      resultLatency(stream.result_latency),
    ]);
    return entry.card;
  }

  async function refresh() {
    const answer = await getJSON("/api/v1/streams");
    const streams = answer.streams || [];
    for (const [name, entry] of [...cards.entries()]) {
      if (!streams.some((stream) => stream.name === name)) {
        window.clearTimeout(entry.timer);
        cards.delete(name);
      }
    }
    const list = document.getElementById("streams");
    if (!streams.length) {
      replaceChildren(list, [el("p", { class: "empty" }, ["No streams configured (see docs/streams.md)."])]);
      return;
    }
    const wanted = streams.map(streamCard);
    const same = wanted.length === list.children.length && wanted.every((card, i) => list.children[i] === card);
    if (!same) replaceChildren(list, wanted);
  }

  document.addEventListener("DOMContentLoaded", () => poll(refresh, POLL_MS));
})();
