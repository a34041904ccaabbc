// The rollout panel of a model's card on the models page (docs/dashboard.md,
// "Rollout panel"), built from the model's `rollout` resource that
// /api/v1/models carries. A new version in a shadow or canary rollout shows
// its figures against the serving version; a promoted one its watch window;
// held versions their reasons. The buttons (Promote and Abort while a rollout
// is in progress, Release while a version is held) are for a logged-in user;
// models.js posts them, as it posts every model action.
"use strict";

window.edgeboxRollout = (() => {
  const { el, known, number, clock, loggedIn, stateTag } = window.edgebox;

  const IN_PROGRESS = new Set(["shadow", "canary"]);

  const ms = (value) => (known(value) ? `${number(value, 2)} ms` : "–");

  // A model's card shows the panel once it has something to say: a rollout or
  // watch in progress, a held version, or how the last rollout ended.
  function shown(rollout) {
    return Boolean(rollout) && (rollout.stage !== "none" || rollout.held.length > 0 || Boolean(rollout.last));
  }

  function facts(rows) {
    return el(
      "dl",
      { class: "facts compact rollout-figures" },
      rows.flatMap(([key, label, text]) => [el("dt", {}, [label]), el("dd", { dataset: { figure: key } }, [text])]),
    );
  }

  function agreement(rollout) {
    if (!known(rollout.agreement)) return "–";
    return `${number(rollout.agreement * 100, 1)} % (${rollout.agreed} of ${rollout.samples} agree)`;
  }

  // The two p95 latencies side by side; during the watch window a row for the
  // promoted version's own answers since (the serving one is not measured then).
  function latencies(rollout) {
    const rows = [
      el("tr", { dataset: { row: "p95" } }, [
        el("th", { scope: "row" }, [rollout.stage === "watching" ? "p95 during the rollout" : "p95 latency"]),
        el("td", { dataset: { side: "new" } }, [ms(rollout.candidate_p95_ms)]),
        el("td", { dataset: { side: "serving" } }, [ms(rollout.serving_p95_ms)]),
      ]),
    ];
    if (rollout.watch) {
      rows.push(el("tr", { dataset: { row: "watch-p95" } }, [
        el("th", { scope: "row" }, ["p95 since promotion"]),
        el("td", { dataset: { side: "new" } }, [ms(rollout.watch.p95_ms)]),
        el("td", { dataset: { side: "serving" } }, ["–"]),
      ]));
    }
    const [candidate, serving] = rollout.stage === "watching" ? ["promoted", "previous"] : ["new", "serving"];
    return el("table", { class: "grid rollout-latency" }, [
      el("thead", {}, [el("tr", {}, [
        el("th", {}, [""]),
        el("th", {}, [`version ${rollout.version} (${candidate})`]),
        el("th", {}, [`version ${rollout.serving_version} (${serving})`]),
      ])]),
      el("tbody", {}, rows),
    ]);
  }

  function inProgress(rollout) {
    const rows = [
      ["samples", "samples", `${rollout.samples} / ${rollout.samples_wanted}`],
    ];
    if (rollout.policy === "shadow") rows.push(["agreement", "agreement", agreement(rollout)]);
    rows.push(
      ["errors", "errors", String(rollout.errors)],
      ["dropped", "dropped samples", String(rollout.dropped)],
      ["last_disagreement", "last disagreement", rollout.last_disagreement || "none"],
    );
    return [
      el("p", { class: "rollout-title" }, [
        stateTag(rollout.stage),
        ` version ${rollout.version} against serving version ${rollout.serving_version}, since ${clock(rollout.started)}`,
      ]),
      facts(rows),
      latencies(rollout),
    ];
  }

  function watching(rollout) {
    const watch = rollout.watch || {};
    return [
      el("p", { class: "rollout-title" }, [
        stateTag("watching"),
        ` version ${rollout.version} promoted; version ${rollout.serving_version} stays loaded while it is watched`,
      ]),
      facts([
        ["watch_until", "watched until", clock(watch.until)],
        ["watch_requests", "requests since promotion", String(watch.requests ?? "–")],
        ["watch_errors", "errors since promotion", String(watch.errors ?? "–")],
        ["samples", "rollout samples", `${rollout.samples} / ${rollout.samples_wanted}`],
      ]),
      latencies(rollout),
    ];
  }

  function held(rollout) {
    if (!rollout.held.length) return null;
    return el("ul", { class: "rollout-held" }, rollout.held.map((entry) =>
      el("li", { dataset: { version: String(entry.version), kind: entry.kind } }, [
        el("strong", {}, [`version ${entry.version} ${entry.kind.replace(/_/g, " ")}`]),
        ` since ${clock(entry.since)}: `,
        el("span", { class: "reason" }, [entry.reason]),
      ])));
  }

  function last(rollout) {
    if (!rollout.last) return null;
    const { version, result, reason, at } = rollout.last;
    return el("p", { class: "rollout-last subtle" }, [
      `Last rollout: version ${version} ${result.replace(/_/g, " ")} at ${clock(at)}: ${reason}`,
    ]);
  }

  // Everything but the buttons: rebuilt whenever a figure moves.
  function figures(rollout) {
    let body = [];
    if (IN_PROGRESS.has(rollout.stage)) body = inProgress(rollout);
    else if (rollout.stage === "watching") body = watching(rollout);
    return [el("h3", {}, ["Rollout"]), ...body, held(rollout), last(rollout)];
  }

  // What the buttons depend on, so they are rebuilt only when that changes.
  function actionsKey(rollout, busy) {
    return JSON.stringify([rollout.stage, rollout.held.map((entry) => entry.version), busy, loggedIn()]);
  }

  // `act(path, label)` posts /api/v1/models/<name>/<path> (models.js).
  function actions(rollout, busy, act) {
    const buttons = [];
    if (IN_PROGRESS.has(rollout.stage)) {
      buttons.push(
        ["promote", "Promote", `Promote version ${rollout.version}`],
        ["abort", "Abort", `Abort version ${rollout.version}`],
      );
    }
    if (rollout.stage === "watching") {
      buttons.push(["abort", "Roll back", `Roll back to version ${rollout.serving_version}`]);
    }
    if (rollout.held.length) {
      const versions = rollout.held.map((entry) => entry.version).join(", ");
      buttons.push(["release", "Release", `Release version ${versions}`]);
    }
    if (!buttons.length) return [];
    if (!loggedIn()) return [el("p", { class: "hint" }, ["Log in to promote, abort or release."])];
    return [el("div", { class: "actions rollout-actions" }, buttons.map(([action, text, title]) =>
      el("button", {
        type: "button", class: action, disabled: busy, title,
        dataset: { action: `rollout-${action}` },
        onclick: () => act(`rollout/${action}`, `rollout ${action}`),
      }, [text])))];
  }

  return { shown, figures, actions, actionsKey };
})();
