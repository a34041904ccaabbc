// Board: what jtop shows, from /api/v1/board every 2 s: per-core CPU bars and
// clocks, EMC and GPU load and clock, fan, power mode and jetson_clocks, the
// power rails by name, the engines (DLA, PVA, NVENC...) and every temperature
// zone. A value the telemetry source cannot know (null) is shown as "–",
// never as 0.
"use strict";

(() => {
  const { el, replaceChildren, getJSON, poll, known, number, bytes, clock, stateTag } = window.edgebox;

  const POLL_MS = 2000;
  const UNKNOWN = number(null);

  const withUnit = (value, digits, unit) => (known(value) ? `${number(value, digits)} ${unit}` : UNKNOWN);
  const watts = (milliwatts) => (known(milliwatts) ? withUnit(milliwatts / 1000, 2, "W") : UNKNOWN);
  const volts = (millivolts) => (known(millivolts) ? withUnit(millivolts / 1000, 2, "V") : UNKNOWN);

  function onOff(value) {
    if (!known(value)) return UNKNOWN;
    return stateTag(value ? "on" : "off");
  }

  function powerMode(sample) {
    if (!known(sample.nvpmodel) && !known(sample.nvpmodel_id)) return UNKNOWN;
    const name = known(sample.nvpmodel) ? sample.nvpmodel : "unnamed mode";
    return known(sample.nvpmodel_id) ? `${name} (mode ${sample.nvpmodel_id})` : name;
  }

  // "52.3 % at 1301 MHz"; either part "–" when unknown.
  function clocked(loadPct, freqMhz) {
    if (!known(loadPct) && !known(freqMhz)) return UNKNOWN;
    return `${withUnit(loadPct, 1, "%")} at ${withUnit(freqMhz, 0, "MHz")}`;
  }

  function gpu(sample, device) {
    if (!sample.gpu) return device && device.has_gpu ? UNKNOWN : "no GPU";
    return clocked(sample.gpu.load_pct, sample.gpu.freq_mhz);
  }

  function memory(sample) {
    if (!known(sample.memory_used_bytes)) return UNKNOWN;
    return `${bytes(sample.memory_used_bytes)} of ${bytes(sample.memory_total_bytes)}`;
  }

  function fact(name, label, value) {
    return [el("dt", {}, [label]), el("dd", { dataset: { fact: name } }, [value])];
  }

  function renderFacts(device, sample) {
    replaceChildren(document.getElementById("board-facts"), [
      ...fact("model", "Model", device && device.model ? device.model : UNKNOWN),
      ...fact("jetpack", "JetPack / L4T", device ? `${device.jetpack || UNKNOWN} / ${device.l4t || UNKNOWN}` : UNKNOWN),
      ...fact("nvpmodel", "Power mode", powerMode(sample)),
      ...fact("jetson_clocks", "jetson_clocks", onOff(sample.jetson_clocks)),
      ...fact("total_power", "Total power", watts(sample.total_power_mw)),
      ...fact("cpu", "CPU", withUnit(sample.cpu_pct, 1, "%")),
      ...fact("gpu", "GPU", gpu(sample, device)),
      ...fact("emc", "EMC", clocked(sample.emc_pct, sample.emc_freq_mhz)),
      ...fact("memory", "Memory", memory(sample)),
      ...fact("fan", "Fan", withUnit(sample.fan_pct, 0, "%")),
      ...fact("sampled", "Sampled", clock(sample.timestamp)),
    ]);
  }

  function renderCores(sample) {
    const cores = sample.cpu_per_core_pct || [];
    const list = document.getElementById("cores");
    if (!cores.length) {
      replaceChildren(list, [el("li", { class: "empty" }, ["Per-core load not known to this source."])]);
      return;
    }
    replaceChildren(list, cores.map((load, index) => {
      const bar = el("span", { class: "bar" });
      if (known(load)) {
        const fill = el("span", { class: "fill" });
        fill.style.width = `${Math.max(0, Math.min(100, load))}%`;
        bar.append(fill);
      }
      const freq = (sample.cpu_freq_mhz || [])[index];
      return el("li", { class: "core", dataset: { core: String(index), known: String(known(load)) } }, [
        el("span", { class: "label" }, [`CPU${index + 1}`]),
        bar,
        el("span", { class: "value" }, [withUnit(load, 1, "%")]),
        el("span", { class: "clock" }, [withUnit(freq, 0, "MHz")]),
      ]);
    }));
  }

  function rows(tbody, entries, emptyText, columns, row) {
    if (!entries.length) {
      replaceChildren(tbody, [el("tr", {}, [el("td", { class: "empty", colspan: String(columns) }, [emptyText])])]);
      return;
    }
    replaceChildren(tbody, entries.map(row));
  }

  function renderEngines(sample) {
    const engines = Object.entries(sample.engines || {}).sort(([a], [b]) => a.localeCompare(b));
    rows(document.querySelector("#engines tbody"), engines, "No engines known to this source.", 3, ([name, engine]) =>
      el("tr", { dataset: { engine: name } }, [
        el("td", { class: "name" }, [name]),
        el("td", { class: "state-cell" }, [onOff(engine.online)]),
        el("td", { class: "num clock" }, [withUnit(engine.freq_mhz, 0, "MHz")]),
      ]));
  }

  function renderRails(sample) {
    const rails = Object.entries(sample.power || {}).sort(([a], [b]) => a.localeCompare(b));
    rows(document.querySelector("#rails tbody"), rails, "No power rails known to this source.", 4, ([name, rail]) =>
      el("tr", { dataset: { rail: name } }, [
        el("td", { class: "name" }, [name]),
        el("td", { class: "num voltage" }, [volts(rail.voltage_mv)]),
        el("td", { class: "num current" }, [withUnit(rail.current_ma, 0, "mA")]),
        el("td", { class: "num power" }, [watts(rail.power_mw)]),
      ]));
    document.getElementById("total-power").textContent = watts(sample.total_power_mw);
  }

  function renderTemperatures(sample) {
    const zones = Object.entries(sample.temperatures_c || {}).sort(([a], [b]) => a.localeCompare(b));
    rows(document.querySelector("#temperatures tbody"), zones, "No temperature zones known to this source.", 2, ([zone, celsius]) =>
      el("tr", { dataset: { zone } }, [
        el("td", { class: "name" }, [zone]),
        el("td", { class: "num temperature" }, [number(celsius, 1)]),
      ]));
  }

  async function refresh() {
    const answer = await getJSON("/api/v1/board");
    const note = document.getElementById("board-note");
    note.textContent = answer.reason || "";
    note.classList.toggle("hidden", !answer.reason);
    const sample = answer.sample;
    document.getElementById("board-source").textContent = sample ? `from ${sample.source}` : "";
    renderFacts(answer.device, sample || {});
    renderCores(sample || {});
    renderEngines(sample || {});
    renderRails(sample || {});
    renderTemperatures(sample || {});
  }

  document.addEventListener("DOMContentLoaded", () => poll(refresh, POLL_MS));
})();
