// What every dashboard page shares: JSON GET/POST against /api/v1/ (POSTs carry
// the page's CSRF token), a poll loop that never overlaps itself, DOM building
// without innerHTML (API strings are shown as text, never parsed as markup), and
// number formatting. Pages use only the JSON API; nothing here knows a page.
"use strict";

window.edgebox = (() => {
  const csrfToken = () => {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  };

  const loggedIn = () => document.body.dataset.loggedIn === "true";

  // `body` is the server's JSON answer when it sent one: some refusals carry
  // more than the text (an unload's `used_by`).
  class ApiError extends Error {
    constructor(status, message, body = null) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }

  // The server's error body is JSON {"error": "..."} (Triton's shape); fall back
  // to the status text when a proxy or the WSGI server answered instead.
  async function errorOf(response) {
    let text = "";
    try {
      text = await response.text();
      const body = JSON.parse(text);
      if (body && typeof body.error === "string") return new ApiError(response.status, body.error, body);
      if (body && typeof body.message === "string") return new ApiError(response.status, body.message, body);
    } catch (ignored) {
      // not JSON: use the text itself
    }
    const detail = text.trim() && text.length < 300 ? text.trim() : response.statusText;
    return new ApiError(response.status, `${response.status} ${detail}`.trim());
  }

  async function getJSON(url) {
    const response = await fetch(url, {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
      cache: "no-store",
    });
    if (!response.ok) throw await errorOf(response);
    return response.json();
  }

  async function postJSON(url, body) {
    const response = await fetch(url, {
      method: "POST",
      headers: {
        Accept: "application/json",
        "Content-Type": "application/json",
        "X-CSRF-Token": csrfToken(),
      },
      credentials: "same-origin",
      cache: "no-store",
      body: JSON.stringify(body || {}),
    });
    if (!response.ok) throw await errorOf(response);
    const text = await response.text();
    return text ? JSON.parse(text) : {};
  }

  // One banner for the page: the daemon stopped answering, or our session ended.
  function showConnection(message) {
    const banner = document.getElementById("connection");
    if (!banner) return;
    banner.textContent = message || "";
    banner.classList.toggle("hidden", !message);
  }

  // Calls `task` now and then `intervalMs` after each run finishes, so a slow
  // answer never stacks requests. A failure shows in the banner and the loop
  // goes on; the next success clears it.
  function poll(task, intervalMs) {
    let timer = null;
    const run = async () => {
      try {
        await task();
        showConnection("");
      } catch (error) {
        if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
          showConnection(`Not allowed: ${error.message}. Log in to see this page.`);
        } else {
          showConnection(`Dashboard unreachable: ${error.message}`);
        }
      }
      timer = window.setTimeout(run, intervalMs);
    };
    run();
    return () => window.clearTimeout(timer);
  }

  // el("td", {class: "state", dataset: {state: "READY"}}, ["READY"])
  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of [].concat(children === undefined ? [] : children)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function replaceChildren(parent, children) {
    parent.replaceChildren(...children.filter((child) => child));
  }

  const known = (value) => value !== null && value !== undefined;

  function number(value, digits = 1) {
    if (!known(value) || Number.isNaN(value)) return "–";
    return Number(value).toFixed(digits);
  }

  function bytes(value) {
    if (!known(value)) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let scaled = Number(value);
    let unit = 0;
    while (Math.abs(scaled) >= 1024 && unit < units.length - 1) {
      scaled /= 1024;
      unit += 1;
    }
    return `${scaled.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
  }

  function duration(seconds) {
    if (!known(seconds)) return "–";
    const s = Math.max(0, Math.floor(seconds));
    const days = Math.floor(s / 86400);
    const hours = Math.floor((s % 86400) / 3600);
    const minutes = Math.floor((s % 3600) / 60);
    if (days) return `${days} d ${hours} h`;
    if (hours) return `${hours} h ${minutes} min`;
    if (minutes) return `${minutes} min ${s % 60} s`;
    return `${s} s`;
  }

  function clock(epochSeconds) {
    if (!known(epochSeconds)) return "–";
    return new Date(epochSeconds * 1000).toLocaleTimeString([], { hour12: false });
  }

  // A state name (READY, UNAVAILABLE, connected, ...) as a coloured tag; the
  // class comes from the lower-cased name so the CSS decides the colour.
  function stateTag(state) {
    const name = known(state) ? String(state) : "unknown";
    return el("span", { class: `state state-${name.toLowerCase().replace(/[^a-z0-9]+/g, "-")}` }, [name]);
  }

  function markNav() {
    const page = document.body.dataset.page;
    for (const link of document.querySelectorAll("[data-nav]")) {
      if (link.dataset.nav === page) link.setAttribute("aria-current", "page");
    }
  }

  document.addEventListener("DOMContentLoaded", markNav);

  return {
    ApiError, getJSON, postJSON, poll, el, replaceChildren, loggedIn, known,
    number, bytes, duration, clock, stateTag, showConnection,
  };
})();
