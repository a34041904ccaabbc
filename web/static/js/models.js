// Models: every model with its versions (state, reason, device, placement
// notes), its statistics and last error, from /api/v1/models every 2 s. Load
// and unload buttons appear only for a logged-in user when the daemon runs in
// explicit model-control mode. In poll mode a logged-in user gets, for a model
// with more than one version folder, "Roll back to" (parks the newer version
// folders) and, while some are parked, "Restore"; the folders come from
// /api/v1/version-folders. A model with a rollout, a held version or a past
// rollout shows the rollout panel (rollout.js) in its card, in every mode. A
// refused action shows the server's error text in the model's card until the
// next action. Unloading a model that loaded ensembles use would take them
// down too: the API refuses with 409 and their names (`used_by`) unless the
// POST says {"confirm": true}, and the page asks the user before sending it.
"use strict";

(() => {
  const { ApiError, el, replaceChildren, getJSON, postJSON, poll, loggedIn, known, number, stateTag } = window.edgebox;
  const rolloutPanel = window.edgeboxRollout;

  const POLL_MS = 2000;
  const actionErrors = new Map();
  const pending = new Set();
  let controlMode = "none";
  let folders = new Map();

  // docs/dashboard.md, GET /api/v1/models: Triton's statistics summed over
  // the served versions; times in microseconds, null before the first request
  // (p50/p99 from the latency histogram, within 25%).
  const STATS = [
    ["requests_success", "requests", (v) => String(v)],
    ["requests_failure", "failures", (v) => String(v)],
    ["inference_count", "inferences", (v) => String(v)],
    ["execution_count", "executions", (v) => String(v)],
    ["mean_request_us", "mean request", (v) => `${number(v / 1000, 2)} ms`],
    ["mean_queue_us", "mean queue", (v) => `${number(v / 1000, 2)} ms`],
    ["mean_compute_infer_us", "mean compute", (v) => `${number(v / 1000, 2)} ms`],
    ["p50_us", "p50", (v) => `${number(v / 1000, 2)} ms`],
    ["p99_us", "p99", (v) => `${number(v / 1000, 2)} ms`],
    ["batch_sizes", "batch sizes", (v) => batchSizes(v)],
    ["last_inference_ms", "last inference", (v) => (v ? new Date(v).toLocaleTimeString([], { hour12: false }) : "never")],
  ];

  function batchSizes(value) {
    if (!Array.isArray(value) || !value.length) return "–";
    return value.map((b) => `${b.batch_size} \u00d7 ${b.executions}`).join(", ");
  }

  function genericValue(value) {
    if (typeof value === "number") return Number.isInteger(value) ? String(value) : number(value, 2);
    if (typeof value === "object") return JSON.stringify(value);
    return String(value);
  }

  function statsList(stats) {
    const given = stats || {};
    const shown = STATS.filter(([key]) => key in given).map(([key, label, format]) => [key, label, known(given[key]) ? format(given[key]) : "–"]);
    const knownKeys = new Set(STATS.map(([key]) => key));
    const others = Object.entries(given)
      .filter(([key]) => !knownKeys.has(key))
      .map(([key, value]) => [key, key.replace(/_/g, " "), known(value) ? genericValue(value) : "–"]);
    const rows = shown.concat(others);
    if (!rows.length) return el("p", { class: "subtle" }, ["No statistics yet."]);
    return el(
      "dl",
      { class: "stats" },
      rows.flatMap(([key, label, text]) => [el("dt", {}, [label]), el("dd", { dataset: { stat: key } }, [text])]),
    );
  }

  function versionsTable(model) {
    const versions = model.versions || [];
    const rows = versions.length
      ? versions.map((version) =>
          el("tr", { dataset: { version: String(version.version ?? "") } }, [
            el("td", { dataset: { label: "Version" } }, [known(version.version) ? String(version.version) : "–"]),
            el("td", { class: "version-state", dataset: { label: "State" } }, [stateTag(version.state)]),
            el("td", { class: "reason", dataset: { label: "Reason" } }, [version.reason || ""]),
            el("td", { dataset: { label: "Device" } }, [version.device || "–"]),
            el("td", { class: "notes", dataset: { label: "Notes" } }, [notesText(version.notes)]),
          ]),
        )
      : [el("tr", {}, [el("td", { colspan: "5", class: "subtle" }, ["No versions found."])])];
    return el("table", { class: "grid versions" }, [
      el("thead", {}, [el("tr", {}, ["Version", "State", "Reason", "Device", "Notes"].map((h) => el("th", {}, [h])))]),
      el("tbody", {}, rows),
    ]);
  }

  function notesText(notes) {
    if (!known(notes) || notes === "") return "";
    if (Array.isArray(notes)) return notes.join("; ");
    if (typeof notes === "object") return Object.entries(notes).map(([k, v]) => `${k}: ${v}`).join("; ");
    return String(notes);
  }

  // POSTs /api/v1/models/<name>/<path>: `path` is the action's name, or
  // "rollout/promote" and the like; `label` names it in a refusal.
  // `send` replaces the single POST (unload's ask-then-confirm).
  async function act(name, path, body, label = path, send = postJSON) {
    pending.add(name);
    actionErrors.delete(name);
    render(lastAnswer);
    try {
      await send(`/api/v1/models/${encodeURIComponent(name)}/${path}`, body);
    } catch (error) {
      actionErrors.set(name, `${label} '${name}' failed: ${error.message}`);
    } finally {
      pending.delete(name);
    }
    await refresh();
  }

  // The first POST unloads only when no loaded ensemble uses the model; a
  // 409 names those that do, and the user's "OK" sends it again confirmed.
  async function unloadAsking(url, name) {
    try {
      return await postJSON(url, {});
    } catch (error) {
      const usedBy = error instanceof ApiError && error.status === 409 && error.body ? error.body.used_by : null;
      if (!Array.isArray(usedBy) || !usedBy.length) throw error;
      const listed = usedBy.map((ensemble) => `'${ensemble}'`).join(", ");
      const question = `Unloading '${name}' also unloads the loaded ensembles that use it: ${listed}. Unload them all?`;
      if (!window.confirm(question)) return null;
      return postJSON(url, { confirm: true });
    }
  }

  // docs/dashboard.md, rollback: every version folder newer than the one
  // chosen moves to <model>/.rolled-back/ until "Restore".
  function rollbackActions(model) {
    const found = folders.get(model.name);
    if (!found) return null;
    const older = found.versions.slice(0, -1);
    const busy = pending.has(model.name);
    const parts = [];
    if (older.length) {
      const select = el("select", { class: "rollback-version", "aria-label": "version to roll back to", dataset: { model: model.name } },
        older.slice().reverse().map((version) => el("option", { value: String(version) }, [`version ${version}`])));
      parts.push(select, el("button", {
        type: "button", class: "rollback", disabled: busy, dataset: { action: "rollback", model: model.name },
        onclick: () => act(model.name, "rollback", { version: Number(select.value) }),
      }, ["Roll back to"]));
    }
    if (found.rolled_back.length) {
      parts.push(el("button", {
        type: "button", class: "restore", disabled: busy, dataset: { action: "restore", model: model.name },
        onclick: () => act(model.name, "restore"),
      }, [`Restore ${found.rolled_back.join(", ")}`]));
    }
    return parts.length ? el("div", { class: "actions" }, parts) : null;
  }

  function actions(model) {
    if (loggedIn() && controlMode === "poll") return rollbackActions(model);
    if (!loggedIn() || controlMode !== "explicit") return null;
    const ready = (model.versions || []).some((version) => version.state === "READY");
    const busy = pending.has(model.name);
    return el("div", { class: "actions" }, [
      el("button", {
        type: "button", class: "load", disabled: busy, dataset: { action: "load", model: model.name },
        onclick: () => act(model.name, "load"),
      }, [ready ? "Reload" : "Load"]),
      el("button", {
        type: "button", class: "unload", disabled: busy || !ready, dataset: { action: "unload", model: model.name },
        onclick: () => act(model.name, "unload", undefined, "unload", (url) => unloadAsking(url, model.name)),
      }, ["Unload"]),
    ]);
  }

  // Cards are kept per model and their parts rebuilt only when what they show
  // changed, so a button is not swapped under the pointer by a poll that only
  // moved the request counters.
  const cards = new Map();

  function updatePart(entry, part, key, build) {
    if (entry.keys[part] === key) return;
    entry.keys[part] = key;
    replaceChildren(entry[part], [].concat(build()));
  }

  function modelCard(model) {
    let entry = cards.get(model.name);
    if (!entry) {
      const head = el("header", { class: "model-head" });
      const status = el("div", { class: "model-status" });
      const rolloutFigures = el("div", { class: "rollout-body" });
      const rolloutActions = el("div", { class: "rollout-buttons" });
      const rollout = el("section", { class: "rollout hidden" }, [rolloutFigures, rolloutActions]);
      const body = el("div", { class: "model-body" });
      const card = el("article", { class: "card model", id: `model-${model.name}`, dataset: { model: model.name } }, [head, status, rollout, body]);
      entry = { card, head, status, rollout, rolloutFigures, rolloutActions, body, keys: {} };
      cards.set(model.name, entry);
    }
    const ready = (model.versions || []).some((version) => version.state === "READY");
    const usedBy = model.used_by || [];
    updatePart(entry, "head", JSON.stringify([model.platform, usedBy, ready, pending.has(model.name), loggedIn(), controlMode, folders.get(model.name)]), () => [
      el("h2", {}, [model.name]),
      el("span", { class: "platform" }, [model.platform || ""]),
      el("a", { class: "history-link", href: `/history?model=${encodeURIComponent(model.name)}` }, ["History"]),
      usedBy.length ? el("span", { class: "used-by" }, [`used by ${usedBy.join(", ")}`]) : null,
      actions(model),
    ]);
    const error = actionErrors.get(model.name) || "";
    updatePart(entry, "status", error, () => (error ? [el("p", { class: "error action-error", role: "alert" }, [error])] : []));
    updateRollout(entry, model);
    updatePart(entry, "body", JSON.stringify([model.versions, model.stats, model.last_error]), () => [
      versionsTable(model),
      statsList(model.stats),
      model.last_error ? el("p", { class: "last-error" }, [el("strong", {}, ["Last error: "]), model.last_error]) : null,
    ]);
    return entry.card;
  }

  function updateRollout(entry, model) {
    const rollout = model.rollout;
    const shown = rolloutPanel.shown(rollout);
    entry.rollout.classList.toggle("hidden", !shown);
    entry.rollout.dataset.stage = shown ? rollout.stage : "";
    if (!shown) return;
    const busy = pending.has(model.name);
    updatePart(entry, "rolloutFigures", JSON.stringify(rollout), () => rolloutPanel.figures(rollout));
    updatePart(entry, "rolloutActions", rolloutPanel.actionsKey(rollout, busy), () =>
      rolloutPanel.actions(rollout, busy, (path, label) => act(model.name, path, undefined, label)));
  }

  let lastAnswer = { models: [] };

  function render(answer) {
    controlMode = answer.control_mode || "none";
    document.getElementById("control-mode").textContent = `model control: ${controlMode}`;
    const hint = document.getElementById("login-hint");
    hint.textContent = controlMode === "poll" ? "Log in to roll models back to an earlier version." : "Log in to load or unload models.";
    hint.classList.toggle("hidden", loggedIn() || (controlMode !== "explicit" && controlMode !== "poll"));
    const models = answer.models || [];
    const list = document.getElementById("models");
    for (const name of [...cards.keys()]) {
      if (!models.some((model) => model.name === name)) cards.delete(name);
    }
    if (!models.length) {
      replaceChildren(list, [el("p", { class: "empty" }, ["No models in the repository."])]);
      return;
    }
    const wanted = models.map(modelCard);
    const same = wanted.length === list.children.length && wanted.every((card, i) => list.children[i] === card);
    if (!same) replaceChildren(list, wanted);
  }

  async function refresh() {
    lastAnswer = await getJSON("/api/v1/models");
    if (lastAnswer.control_mode === "poll" && loggedIn()) {
      const answer = await getJSON("/api/v1/version-folders");
      folders = new Map(answer.models.map((model) => [model.name, model]));
    }
    render(lastAnswer);
  }

  document.addEventListener("DOMContentLoaded", () => poll(refresh, POLL_MS));
})();
