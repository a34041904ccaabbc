// A stream's health as streams.js shows it: the badge (healthy, degraded,
// reconnecting, down) and its reason, configured vs achieved fps over the
// recent window, how long ago the last frame came (the server's clock, so a
// wrong browser clock cannot lie), reconnects, drops, the last health
// changes, and the snapshot download. Names are only ever set as text.
"use strict";

window.edgeboxStreamHealth = (() => {
  const { el, known, number, duration, clock, stateTag } = window.edgebox;
  const UNKNOWN = number(null);

  function badge(stream) {
    const health = stream.health;
    return el("span", { class: "stream-health", title: health && health.reason ? health.reason : "" }, [
      stateTag(health ? health.health : null),
    ]);
  }

  function fps(health) {
    const achieved = `${number(health.fps_achieved, 1)} fps`;
    if (!known(health.fps_configured)) return `${achieved} (no cap)`;
    return `${achieved} of ${number(health.fps_configured, 0)}`;
  }

  function lastFrame(health) {
    if (!known(health.last_frame_age_s)) return "none yet";
    return `${duration(health.last_frame_age_s)} ago`;
  }

  function facts(stream) {
    const health = stream.health;
    if (!health) return [];
    const span = `${number(health.window_s, 0)} s`;
    return [
      health.reason ? el("dt", {}, ["Why"]) : null,
      health.reason ? el("dd", { class: "health-reason" }, [health.reason]) : null,
      el("dt", {}, [`FPS (last ${span})`]), el("dd", { class: "fps fps-achieved" }, [fps(health)]),
      el("dt", {}, ["From source"]), el("dd", { class: "capture-fps" }, [`${number(health.capture_fps, 1)} fps`]),
      el("dt", {}, ["Last frame"]), el("dd", { class: "last-frame" }, [lastFrame(health)]),
      el("dt", {}, ["Reconnects"]), el("dd", { class: "reconnects" }, [String(stream.reconnects ?? UNKNOWN)]),
      el("dt", {}, ["Dropped"]),
      el("dd", { class: "drops" }, [`${stream.frames_dropped ?? UNKNOWN} (${health.dropped_recently} in last ${span})`]),
    ];
  }

  // Made once per card and refilled, so a panel the operator opened stays open.
  function historyPanel() {
    const summary = el("summary", {});
    const list = el("ol", {});
    const panel = el("details", { class: "health-history hidden" }, [summary, list]);
    return { panel, summary, list };
  }

  function fillHistory(history, stream) {
    const changes = stream.health ? stream.health.changes : [];
    history.panel.classList.toggle("hidden", !changes.length);
    history.summary.textContent = `Health changes (${changes.length})`;
    history.list.replaceChildren(...changes.map((change) => el("li", { dataset: { health: change.health } }, [
      el("span", { class: "time" }, [clock(change.at)]),
      stateTag(change.health),
      change.reason ? el("span", { class: "reason" }, [change.reason]) : null,
    ])));
  }

  function snapshotLink(stream) {
    const href = `/api/v1/streams/${encodeURIComponent(stream.name)}/snapshot.jpg`;
    return el("a", { class: "snapshot button-link", href, download: "" }, ["Download snapshot"]);
  }

  return { badge, facts, historyPanel, fillHistory, snapshotLink };
})();
