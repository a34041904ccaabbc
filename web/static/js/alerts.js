// The alerts banner on every page: /api/v1/alerts every 2 s (the pages' own
// pace), one line per active alert, critical first, gone once none is
// active. A refused poll (the login ended) hides it; any other failure leaves
// it as it was.
"use strict";

(() => {
  const { el, getJSON, clock, known } = window.edgebox;

  const POLL_MS = 2000;

  function line(alert) {
    const severity = alert.severity === "critical" ? "critical" : "warn";
    return el("li", { class: `alert alert-${severity}`, dataset: { rule: alert.rule, subject: alert.subject, severity } }, [
      el("span", { class: "alert-severity" }, [severity]),
      el("span", { class: "alert-rule" }, [String(alert.rule || "")]),
      el("span", { class: "alert-message" }, [String(alert.message || "")]),
      el("span", { class: "alert-since" }, [known(alert.since) ? `since ${clock(alert.since)}` : ""]),
    ]);
  }

  function show(banner, alerts) {
    const list = banner.querySelector(".alert-list");
    list.replaceChildren(...alerts.map(line));
    const critical = alerts.some((alert) => alert.severity === "critical");
    banner.classList.toggle("alerts-critical", critical);
    banner.querySelector(".alerts-title").textContent = alerts.length === 1 ? "1 active alert" : `${alerts.length} active alerts`;
    banner.classList.toggle("hidden", alerts.length === 0);
  }

  function start() {
    const banner = document.getElementById("alerts");
    // Without a login or anonymous reading the API answers 401: no polling.
    if (!banner || banner.dataset.readable !== "true") return;
    const run = async () => {
      try {
        const answer = await getJSON("/api/v1/alerts");
        show(banner, Array.isArray(answer.alerts) ? answer.alerts : []);
      } catch (error) {
        // A login that ended shows nothing it can no longer vouch for; an
        // unreachable dashboard is the page's own poll's to report.
        if (error.status === 401 || error.status === 403) show(banner, []);
      }
      window.setTimeout(run, POLL_MS);
    };
    run();
  }

  document.addEventListener("DOMContentLoaded", start);
})();
