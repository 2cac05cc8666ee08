// The page of mme in the browser (docs/web.md): the form becomes the `setup` block of
// `mme estimate --json`, mme.js (the engine in WebAssembly) answers with the same document, and
// the result is repainted on every change.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const intFields = ["tp", "pp", "vpp", "cp", "ep", "etp", "num_gpus", "micro_batch_size", "seq_length",
    "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"];
  let engine = null;

  function call(request) {
    const ptr = engine.ccall("mme_web_run", "number", ["string"], [JSON.stringify(request)]);
    const text = engine.UTF8ToString(ptr);
    engine.ccall("mme_web_free", null, ["number"], [ptr]);
    return JSON.parse(text);
  }

  const gib = (bytes) => (bytes / 2 ** 30).toFixed(2) + " GiB";
  const cell = (row, text, cls) => {
    const td = row.insertCell();
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  };

  // The form as the JSON `setup` block: empty fields are left out (the engine's defaults).
  function setupBlock() {
    const setup = {};
    for (const id of intFields) {
      const text = $(id).value.trim();
      if (text === "") continue;
      if (!/^-?\d+$/.test(text)) throw new Error(`${id}: expected an integer, got '${text}'`);
      setup[id] = Number(text);
    }
    if ($("recompute_granularity").value) setup.recompute_granularity = $("recompute_granularity").value;
    if ($("sequence_parallel").value) setup.sequence_parallel = $("sequence_parallel").value === "true";
    setup.distributed_optimizer = $("distributed_optimizer").checked;
    return setup;
  }

  function showError(message) {
    $("error").textContent = message;
    $("error").hidden = false;
    $("summary").hidden = true;
  }

  function paint(doc, ms) {
    $("error").hidden = true;
    $("summary").hidden = false;
    const peak = doc.peak;
    $("peak-gib").textContent = gib(peak.total_bytes);
    $("peak-stage").textContent = String(peak.pp_rank);
    $("peak-bytes").textContent = String(peak.total_bytes);
    $("upper-gib").textContent = gib(peak.upper_bytes);
    const stages = $("stages").tBodies[0];
    stages.replaceChildren();
    for (const s of doc.stages) {
      const row = stages.insertRow();
      row.dataset.ppRank = String(s.pp_rank);
      cell(row, String(s.pp_rank));
      cell(row, String(s.layers));
      cell(row, gib(s.weight_bytes + s.gradient_bytes));
      cell(row, gib(s.optimizer_bytes));
      cell(row, gib(s.activation_bytes));
      cell(row, gib(s.total_bytes));
      cell(row, gib(s.upper_bytes));
      cell(row, String(s.total_bytes), "bytes");
    }
    const fits = $("fits").tBodies[0];
    fits.replaceChildren();
    for (const f of doc.fits) {
      const row = fits.insertRow();
      cell(row, f.hardware);
      cell(row, gib(f.usable_bytes));
      cell(row, gib(f.needed_bytes));
      cell(row, f.fits ? "fits" : "does not fit", f.fits ? "fits" : "nofit");
    }
    $("timing").textContent = `computed in ${ms.toFixed(1)} ms`;
  }

  function recompute() {
    let setup;
    try {
      setup = setupBlock();
    } catch (e) {
      showError(e.message);
      return;
    }
    const request = { model: $("model").value, setup, gpu: $("gpu").value };
    const t0 = performance.now();
    const doc = call(request);
    const ms = performance.now() - t0;
    if (doc.error) showError(doc.error.message);
    else paint(doc, ms);
    document.body.dataset.state = doc.error ? "error" : "ready";
  }

  function fill(select, values) {
    for (const v of values) {
      const o = document.createElement("option");
      o.value = o.textContent = v;
      select.appendChild(o);
    }
  }

  createMme().then((module) => {
    engine = module;
    fill($("model"), call({ command: "models" }).models);
    fill($("gpu"), call({ command: "gpus" }).gpus.map((g) => g.name));
    $("form").addEventListener("input", recompute);
    $("form").addEventListener("change", recompute);
    recompute();
  }, (e) => showError("the engine did not load: " + e));
})();
