// Logs: the daemon's recent log lines from /api/v1/logs every 3 s, filtered
// by the form's level, text and line count (the server filters; the page
// shows what it answers, newest last, scrolled to the bottom when it was).
"use strict";

(() => {
  const { el, getJSON, poll, clock } = window.edgebox;

  const POLL_MS = 3000;

  function row(line) {
    return el("tr", { class: `log log-${line.level.toLowerCase()}`, dataset: { id: String(line.id) } }, [
      el("td", { class: "time" }, [clock(line.time)]),
      el("td", { class: "schema" }, [line.level]),
      el("td", { class: "logger" }, [line.logger]),
      el("td", { class: "message" }, [line.message]),
    ]);
  }

  function query() {
    const params = new URLSearchParams();
    params.set("level", document.getElementById("log-level").value);
    const text = document.getElementById("log-text").value.trim();
    if (text) params.set("q", text);
    const limit = Number.parseInt(document.getElementById("log-limit").value, 10);
    params.set("limit", String(Number.isFinite(limit) ? Math.min(Math.max(limit, 1), 2000) : 200));
    return params.toString();
  }

  async function refresh() {
    const answer = await getJSON(`/api/v1/logs?${query()}`);
    const body = document.getElementById("logs");
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 8;
    body.replaceChildren(...(answer.lines || []).map(row));
    const empty = document.getElementById("logs-empty");
    empty.textContent = answer.reason || "No log lines match.";
    empty.classList.toggle("hidden", body.children.length > 0);
    if (atBottom) window.scrollTo(0, document.body.scrollHeight);
  }

  document.addEventListener("DOMContentLoaded", () => {
    const form = document.getElementById("log-filters");
    form.addEventListener("submit", (event) => event.preventDefault());
    form.addEventListener("change", () => refresh().catch(() => {}));
    poll(refresh, POLL_MS);
  });
})();
