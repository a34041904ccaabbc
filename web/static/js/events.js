// Events: lifecycle, stream, thermal and MQTT events from
// /api/v1/events?after=<last id> every 2 s, newest on top. The page keeps the
// newest MAX_ROWS; older rows fall off the bottom.
"use strict";

(() => {
  const { el, getJSON, poll, clock, known } = window.edgebox;

  const POLL_MS = 2000;
  const MAX_ROWS = 500;
  const HIDDEN = new Set(["id", "schema", "timestamp", "time"]);
  let lastId = 0;

  // Fields that hold a wall-clock time (an alert's "since", a stream's
  // "next_retry_at") read as one, like the time column.
  const WALL_CLOCK = /^since$|_at$/;

  function detailText(value, key) {
    if (!known(value)) return "–";
    if (typeof value === "number" && WALL_CLOCK.test(key)) return clock(value);
    if (typeof value === "number" && !Number.isInteger(value)) return value.toFixed(3).replace(/\.?0+$/, "");
    if (typeof value === "object") return JSON.stringify(value);
    return String(value);
  }

  function details(event) {
    return Object.entries(event)
      .filter(([key, value]) => !HIDDEN.has(key) && value !== "" && known(value))
      .map(([key, value]) => el("span", { class: "field" }, [el("span", { class: "field-name" }, [key]), " ", detailText(value, key)]));
  }

  function row(event) {
    const schema = event.schema || {};
    const name = schema.name || "event";
    return el("tr", { class: `event event-${name.replace(/^edgebox\./, "").replace(/[^a-z0-9]+/gi, "-")}`, dataset: { id: String(event.id), schema: name } }, [
      el("td", { class: "id" }, [String(event.id)]),
      el("td", { class: "time" }, [clock(known(event.timestamp) ? event.timestamp : event.time)]),
      el("td", { class: "schema" }, [name.replace(/^edgebox\./, "")]),
      el("td", { class: "details" }, details(event)),
    ]);
  }

  async function refresh() {
    const answer = await getJSON(`/api/v1/events?after=${encodeURIComponent(lastId)}`);
    const events = (answer.events || []).filter((event) => event.id > lastId);
    if (events.length) {
      const body = document.getElementById("events");
      const rows = events.sort((a, b) => b.id - a.id).map(row);
      body.prepend(...rows);
      while (body.children.length > MAX_ROWS) body.lastElementChild.remove();
      lastId = events[0].id;
    } else if (known(answer.last_id) && answer.last_id > lastId) lastId = answer.last_id;
    document.getElementById("events-empty").classList.toggle("hidden", document.getElementById("events").children.length > 0);
  }

  document.addEventListener("DOMContentLoaded", () => poll(refresh, POLL_MS));
})();
