// The page of mme in the browser (docs/web.md): the form becomes the setup flags of
// `mme estimate`, mme.js (the command layer and the engine in WebAssembly) answers with the same
// document, and the result is repainted on every change. What the form holds (its fields' flags,
// kinds and values), the layout choices, the command line and the spec file come from mme.js: this
// file spells no knob value and no layout rule. The model is a bundled one, a config.json pasted,
// uploaded or edited in place, or one the page fetches from the hub. The form's state is kept in
// the URL's hash (a shareable link; never the config.json text nor the token).
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  let fields = [];      // the form's fields, from the setup schema ({"command": "form"})
  let intFields = [];   // their ids, by kind
  let selectFields = [];
  let checkFields = []; // switches shown as checkboxes
  let hashFields = [];  // the fields whose text the URL's hash and a kept layout hold
  let engine = null;
  let lastDoc = null;
  let jsonUrl = null;
  let svgUrl = null;
  let specUrl = null;
  let megatronUrl = null;
  const kept = [];

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
  const mode = () => ($("model").value.startsWith("@") ? $("model").value : "bundled");

  // The form as `mme estimate`'s setup flags: a field's flag and its text, a switch as true;
  // empty fields are left out (the CLI's defaults). mme.js reads them as the CLI reads its flags,
  // with the same messages for a bad value.
  function formFlags() {
    const flags = {};
    for (const f of fields) {
      const el = $(f.id);
      if (f.kind === "bool") {
        // A select (auto, on, off) or a checkbox: its flag only when it differs from the default.
        const value = el.type === "checkbox" ? (el.checked === f.on_by_default ? "" : String(el.checked)) : el.value;
        if (value === "true") flags[f.flag] = true;
        if (value === "false") flags[f.off_flag] = true;
      } else if (el.value.trim() !== "") {
        flags[f.flag] = el.value.trim();
      }
    }
    return flags;
  }
  const modelName = () => (mode() === "bundled" ? $("model").value : mode() === "@hub" ? $("hub_id").value.trim() : "config.json");

  // A word of the command line, shell-quoted for display.
  const quote = (w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`);

  // The choices the model and the rest of the layout allow, offered in the fields' lists and
  // listed under them (the fields stay free; the engine's message explains a refusal): mme.js
  // checks each value with the engine's own rules ({"command": "choices"}).
  function offerChoices() {
    const request = { command: "choices", flags: formFlags() };
    const doc = modelInto(request) ? { error: true } : call(request);
    const values = doc.error ? {} : doc.values;
    const text = doc.error ? [] : doc.lines;
    for (const id of ["tp", "pp", "vpp", "cp", "ep", "etp", "num_gpus", "first", "last"]) {
      const joined = (values[id] ?? []).join(",");
      if ($("choices").dataset[id] === joined) continue;  // the DOM is touched only on a change
      $(`${id}-choices`).replaceChildren(...(values[id] ?? []).map((v) => Object.assign(document.createElement("option"), { value: String(v) })));
      $("choices").dataset[id] = joined;
    }
    if ($("choices").textContent !== text.join("\n")) $("choices").textContent = text.join("\n");
  }

  function showError(message) {
    $("error").textContent = message;
    $("error").hidden = false;
    $("summary").hidden = true;
  }

  function paintTables(doc) {
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
    // The peak stage's components ("category/name" -> bytes), largest first within a category.
    const peakStage = doc.stages.find((s) => s.pp_rank === doc.peak.pp_rank) ?? doc.stages[0];
    $("components-stage").textContent = String(peakStage.pp_rank);
    const comps = $("components").tBodies[0];
    comps.replaceChildren();
    const entries = Object.entries(peakStage.components ?? {}).map(([key, bytes]) => {
      const cut = key.indexOf("/");
      return { category: cut < 0 ? key : key.slice(0, cut), name: cut < 0 ? "" : key.slice(cut + 1), key, bytes };
    });
    entries.sort((a, b) => a.category.localeCompare(b.category) || b.bytes - a.bytes);
    for (const e of entries) {
      const row = comps.insertRow();
      row.dataset.key = e.key;
      cell(row, e.category);
      cell(row, e.name);
      cell(row, gib(e.bytes));
      cell(row, String(e.bytes), "bytes");
    }
  }

  function paint(doc, ms) {
    $("error").hidden = true;
    $("summary").hidden = false;
    const peak = doc.peak;
    $("peak-gib").textContent = gib(peak.total_bytes);
    $("peak-stage").textContent = String(peak.pp_rank);
    $("peak-bytes").textContent = String(peak.total_bytes);
    $("upper-gib").textContent = gib(peak.upper_bytes);
    $("upper-bytes").textContent = String(peak.upper_bytes);
    $("upper-stage").textContent = String(peak.upper_pp_rank);
    $("chart").innerHTML = doc.svg ?? "";  // the engine's SVG (render_svg: text escaped)
    paintTables(doc);
    // When the layout fits no GPU: the CLI's next steps (the smallest changes that would fit).
    $("next-steps-box").hidden = !doc.next_steps?.length;
    $("next-steps").replaceChildren(...(doc.next_steps ?? []).map((st) => Object.assign(document.createElement("li"), {
      textContent: st.fits ? `${st.change} brings the upper bound to ${gib(st.needed_bytes)}: fits ${st.fits}` : st.change,
    })));
    $("cli-command").textContent = doc.command.map(quote).join(" ");
    $("tree").textContent = (doc.breakdown ?? "").replace(/^\n/, "");
    const exported = { ...doc };
    for (const extra of ["svg", "breakdown", "megatron_args", "megatron_args_error", "spec", "spec_error", "command"])
      delete exported[extra];
    if (jsonUrl) URL.revokeObjectURL(jsonUrl);
    jsonUrl = URL.createObjectURL(new Blob([JSON.stringify(exported, null, 2) + "\n"], { type: "application/json" }));
    $("export_json").href = jsonUrl;
    // The chart as `mme estimate --svg FILE` writes it (a standalone file: the XML declaration).
    if (svgUrl) URL.revokeObjectURL(svgUrl);
    svgUrl = URL.createObjectURL(new Blob(['<?xml version="1.0" encoding="UTF-8"?>\n' + (doc.svg ?? "")], { type: "image/svg+xml" }));
    $("export_svg").href = svgUrl;
    // The spec file `mme estimate --dump-config` writes, or why the layout has none.
    if (specUrl) URL.revokeObjectURL(specUrl);
    specUrl = doc.spec ? URL.createObjectURL(new Blob([doc.spec], { type: "application/yaml" })) : null;
    $("export_spec").hidden = !specUrl;
    if (specUrl) $("export_spec").href = specUrl;
    // The Megatron-LM launch flags (`mme estimate --print-megatron-args`), or why none exist.
    if (megatronUrl) URL.revokeObjectURL(megatronUrl);
    megatronUrl = doc.megatron_args ? URL.createObjectURL(new Blob([doc.megatron_args], { type: "text/plain" })) : null;
    $("export_megatron").hidden = !megatronUrl;
    if (megatronUrl) $("export_megatron").href = megatronUrl;
    $("megatron-note").textContent = [doc.megatron_args_error ? `No Megatron-LM flags: ${doc.megatron_args_error}` : "",
      doc.spec_error ? `No spec file: ${doc.spec_error}` : ""].filter(Boolean).join(" ");
    $("timing").textContent = `computed in ${ms.toFixed(1)} ms`;
  }

  // The state of the form in the URL's hash, and back.
  function writeHash() {
    const p = new URLSearchParams();
    p.set("model", $("model").value);
    for (const id of hashFields) if ($(id).value.trim() !== "") p.set(id, $(id).value.trim());
    for (const f of checkFields) if ($(f.id).checked !== f.on_by_default) p.set(f.id, String($(f.id).checked));
    history.replaceState(null, "", "#" + p.toString());
  }
  function readHash() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    if (p.has("model") && [...$("model").options].some((o) => o.value === p.get("model"))) $("model").value = p.get("model");
    for (const id of hashFields) if ($(id).tagName === "INPUT" && p.has(id)) $(id).value = p.get(id);
    for (const id of [...selectFields, "gpu"])
      if (p.has(id) && [...$(id).options].some((o) => o.value === p.get(id))) $(id).value = p.get(id);
    for (const f of checkFields) if (p.has(f.id)) $(f.id).checked = p.get(f.id) === "true";
  }

  function updateBoxes() {
    const m = mode();
    $("hub-box").hidden = m !== "@hub";
    $("config-box").hidden = m === "bundled";
    $("edit_config").hidden = m !== "bundled";
  }

  // The model of the form into a request ("model" or "config_text"); a message when there is none.
  function modelInto(request) {
    const m = mode();
    if (m === "bundled") request.model = $("model").value;
    else if ($("config_text").value.trim() === "")
      return m === "@hub" ? "Fetch the model's config.json from the hub first (the Fetch button)." : "Paste or upload a config.json.";
    else request.config_text = $("config_text").value;
    return null;
  }

  function recompute() {
    const start = performance.now();
    updateBoxes();
    offerChoices();
    writeHash();
    lastDoc = null;
    const m = mode();
    const request = { flags: formFlags(), gpu: $("gpu").value, name: modelName(), svg: true, breakdown: true,
      megatron_args: true, spec: true };
    const missingModel = modelInto(request);
    if (missingModel) {
      showError(missingModel);
      document.body.dataset.state = "error";
      return;
    }
    const t0 = performance.now();
    const doc = call(request);
    const ms = performance.now() - t0;
    if (doc.error) showError(doc.error.message);
    else paint(doc, ms);
    lastDoc = doc.error ? null : { doc, model: m === "bundled" ? $("model").value : m === "@hub" ? $("hub_id").value : "config.json" };
    document.body.dataset.state = doc.error ? "error" : "ready";
    document.body.dataset.recomputeMs = (performance.now() - start).toFixed(2);
  }

  // The history of the layouts kept; each row restores its form.
  function snapshot() {
    const s = { model: $("model").value };
    for (const id of hashFields) s[id] = $(id).value;
    for (const f of checkFields) s[f.id] = $(f.id).checked;
    return s;
  }
  function restore(s) {
    $("model").value = s.model;
    for (const id of hashFields) $(id).value = s[id];
    for (const f of checkFields) $(f.id).checked = s[f.id];
    recompute();
  }
  function keep() {
    if (!lastDoc) return;
    const { doc, model } = lastDoc;
    const entry = { state: snapshot(), model, doc, layout: doc.command.slice(3).join(" "), picked: false };
    kept.push(entry);
    const row = $("history").tBodies[0].insertRow();
    const pick = Object.assign(document.createElement("input"), { type: "checkbox", className: "pick", title: "Compare this layout" });
    pick.setAttribute("aria-label", `compare layout ${kept.length}`);
    pick.addEventListener("change", () => {
      entry.picked = pick.checked;
      paintCompare();
    });
    row.insertCell().appendChild(pick);
    cell(row, String(kept.length));
    cell(row, model);
    cell(row, entry.layout);
    cell(row, gib(doc.peak.total_bytes), "peak");
    cell(row, gib(doc.peak.upper_bytes));
    cell(row, doc.fits.filter((f) => f.fits).map((f) => f.hardware).join(", ") || "none");
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = "Restore";
    b.className = "restore";
    b.addEventListener("click", () => restore(entry.state));
    row.insertCell().appendChild(b);
    $("history-box").hidden = false;
  }

  // The layouts ticked in the history, side by side: one column each, the per-stage peaks in rows.
  function paintCompare() {
    const picked = kept.map((e, i) => ({ ...e, n: i + 1 })).filter((e) => e.picked);
    $("compare-box").hidden = picked.length < 2;
    const table = $("compare");
    table.replaceChildren();
    if (picked.length < 2) return;
    const head = table.createTHead().insertRow();
    head.appendChild(document.createElement("th"));
    for (const e of picked) head.appendChild(Object.assign(document.createElement("th"), { textContent: `#${e.n}` }));
    const body = table.createTBody();
    const line = (label, values, key) => {
      const row = body.insertRow();
      if (key) row.dataset.key = key;
      row.appendChild(Object.assign(document.createElement("th"), { textContent: label, scope: "row" }));
      values.forEach((v) => {
        const td = cell(row, v.text ?? v);
        if (v.bytes !== undefined) td.dataset.bytes = String(v.bytes);
      });
    };
    line("Model", picked.map((e) => e.model));
    line("Layout", picked.map((e) => e.layout));
    const stages = Math.max(...picked.map((e) => e.doc.stages.length));
    for (let r = 0; r < stages; r++)
      line(`Stage ${r} peak`, picked.map((e) => (e.doc.stages[r] ? { text: gib(e.doc.stages[r].total_bytes), bytes: e.doc.stages[r].total_bytes } : "")), `stage${r}`);
    line("Peak", picked.map((e) => ({ text: `${gib(e.doc.peak.total_bytes)} (stage ${e.doc.peak.pp_rank})`, bytes: e.doc.peak.total_bytes })), "peak");
    line("Upper bound", picked.map((e) => ({ text: gib(e.doc.peak.upper_bytes), bytes: e.doc.peak.upper_bytes })), "upper");
    line("Fits on", picked.map((e) => e.doc.fits.filter((f) => f.fits).map((f) => f.hardware).join(", ") || "none"), "fits");
  }

  // The hub: GET <endpoint>/<id>/resolve/main/config.json, with the token if one is given. The
  // token lives in the field only (not in the URL, not stored).
  async function fetchHub() {
    const id = $("hub_id").value.trim();
    if (!/^[\w.-]+\/[\w.-]+$/.test(id)) {
      $("hub_status").textContent = "A hub id is org/name.";
      return;
    }
    const url = `${$("hub_endpoint").value.trim().replace(/\/+$/, "")}/${id}/resolve/main/config.json`;
    const headers = {};
    if ($("hub_token").value.trim()) headers.Authorization = `Bearer ${$("hub_token").value.trim()}`;
    $("hub_status").textContent = `fetching ${url} ...`;
    document.body.dataset.hub = "fetching";
    try {
      const res = await fetch(url, { headers });
      if (!res.ok) throw new Error(`${res.status} ${res.statusText}`.trim());
      $("config_text").value = await res.text();
      $("hub_status").textContent = `fetched ${url}`;
    } catch (e) {
      $("hub_status").textContent = `could not fetch ${url}: ${e.message}`;
    }
    document.body.dataset.hub = "done";
    recompute();
  }

  // The planner ("best layouts for N GPUs of type X") runs in a Web Worker with its own copy of
  // the engine, so the page keeps answering while it searches. A page opened from file:// may not
  // start a Worker from a file (Chromium: SecurityError), so the worker is a Blob: the text of
  // mme.js's factory (createMme, the WebAssembly inlined) and of planWorker below.
  function planWorker() {
    let engine = null;
    let current = 0;  // the id of the search running (progress messages carry it)
    self.onmessage = async (e) => {
      const { id, request } = e.data;
      current = id;
      try {
        if (!engine)
          engine = await createMme({ onPlanProgress: (done, total, elapsed) => self.postMessage({ id: current, progress: { done, total, elapsed } }) });
        const ptr = engine.ccall("mme_web_run", "number", ["string"], [JSON.stringify(request)]);
        const text = engine.UTF8ToString(ptr);
        engine.ccall("mme_web_free", null, ["number"], [ptr]);
        self.postMessage({ id, doc: JSON.parse(text) });
      } catch (err) {
        self.postMessage({ id, doc: { error: { code: 1, message: "the planner failed: " + err } } });
      }
    };
  }
  let worker = null;
  let workerUrl = null;
  let planId = 0;
  let planStart = 0;
  function newWorker() {
    if (!workerUrl)
      workerUrl = URL.createObjectURL(new Blob([`"use strict";\nvar _scriptDir;\nvar createMme = ${createMme.toString()};\n(${planWorker.toString()})();\n`],
        { type: "text/javascript" }));
    const w = new Worker(workerUrl);
    w.onmessage = (e) => onPlanMessage(e.data);
    w.onerror = (e) => finishPlan({ error: { code: 1, message: "the planner's worker failed: " + (e.message || e) } });
    return w;
  }
  const planState = (state) => {
    document.body.dataset.plan = state;
    $("plan_run").disabled = state === "running";
    $("plan_stop").disabled = state !== "running";
  };
  function runPlan() {
    const request = { command: "plan", num_gpus: Number($("plan_num_gpus").value), top: Number($("plan_top").value) };
    if ($("plan_gpu").value) request.gpu = $("plan_gpu").value;
    const seq = fields.find((f) => f.id === "seq_length");
    if ($("seq_length").value.trim() !== "") request.flags = { [seq.flag]: $("seq_length").value.trim() };
    const missingModel = modelInto(request);
    if (missingModel || !(request.num_gpus >= 1) || !(request.top >= 1)) {
      $("plan_status").textContent = missingModel ?? "Give a number of GPUs and of plans (positive integers).";
      return;
    }
    if (!worker) worker = newWorker();
    planId += 1;
    planStart = performance.now();
    document.body.dataset.planProgress = "0";
    $("plan_progress").removeAttribute("value");
    $("plan_status").textContent = "starting the planner ...";
    delete $("plan_status").dataset.base;
    $("plans").tBodies[0].replaceChildren();
    $("plans").hidden = true;
    planState("running");
    worker.postMessage({ id: planId, request });
  }
  function stopPlan() {
    if (worker) worker.terminate();
    worker = null;
    planId += 1;  // a late message of the stopped search is dropped
    $("plan_status").textContent = "stopped";
    planState("stopped");
  }
  function onPlanMessage(msg) {
    if (msg.id !== planId) return;
    if (msg.progress) {
      const { done, total, elapsed } = msg.progress;
      $("plan_progress").max = total;
      $("plan_progress").value = done;
      $("plan_status").textContent = `${done.toLocaleString("en")} / ${total.toLocaleString("en")} layouts, ${elapsed.toFixed(1)} s`;
      document.body.dataset.planProgress = String(Number(document.body.dataset.planProgress) + 1);
      return;
    }
    finishPlan(msg.doc);
  }
  // Applies a plan's layout to the form (its setup block: the `mme plan --json` plan's).
  // "Use": every field of the form from the plan's setup (the fields' ids are the setup's keys);
  // then the setup keys on which the page's estimate still differs from the plan are named (none
  // when the form holds everything the planner chose).
  function usePlan(p) {
    const s = p.setup;
    for (const f of fields) {
      const el = $(f.id), v = s[f.id];
      if (el.type === "checkbox") el.checked = v === true;
      else if (f.id === "sequence_parallel") el.value = "";  // the planner leaves it to the rule: on with TP > 1
      else if (f.kind === "enum") el.value = v === f.null_name ? "" : v;
      else el.value = v === null || v === undefined ? "" : String(v);
    }
    $("gpu").value = $("plan_result").dataset.gpu;
    recompute();
    const differ = lastDoc ? Object.keys(s).filter((k) => JSON.stringify(lastDoc.doc.setup[k]) !== JSON.stringify(s[k])) : ["(no estimate)"];
    document.body.dataset.planDiffers = differ.join(",");
    // The planner's own status, then this plan's note: a second "Use" replaces the note.
    const status = $("plan_status");
    status.textContent = (status.dataset.base ?? status.textContent) +
      (differ.length ? `. The form cannot hold the plan's ${differ.join(", ")}` : "");
  }
  function finishPlan(doc) {
    const ms = performance.now() - planStart;
    $("plan_result").dataset.doc = JSON.stringify(doc);
    if (doc.error) {
      $("plan_status").textContent = doc.error.message;
      planState("error");
      return;
    }
    $("plan_progress").max = 1;
    $("plan_progress").value = 1;
    $("plan_result").dataset.gpu = doc.gpu;
    const gib2 = (b) => (b / 2 ** 30).toFixed(2);
    $("plan_status").textContent = `${doc.evaluated.toLocaleString("en")} layouts, ${doc.valid.toLocaleString("en")} valid, ` +
      `${doc.fitting.toLocaleString("en")} fit ${doc.num_gpus} x ${doc.gpu}; ${(ms / 1000).toFixed(2)} s in the page` +
      (doc.fitting === 0 && doc.smallest ? `. Nothing fits: the smallest peak is ${gib(doc.smallest.peak_bytes)}` +
        (doc.suggestions.length ? `; it would fit with ${doc.suggestions.map((x) => x.change).join(" or ")}` : "") : "");
    $("plan_status").dataset.base = $("plan_status").textContent;
    const body = $("plans").tBodies[0];
    doc.plans.forEach((p, i) => {
      const s = p.setup;
      const row = body.insertRow();
      // The pipeline split: even, or the layers of the first and last stages (first/.../last).
      const f = s.num_layers_in_first_pipeline_stage, l = s.num_layers_in_last_pipeline_stage;
      const split = s.pp === 1 || (f === null && l === null) ? "even" : `${f ?? "even"}${s.pp > 2 ? "/.../" : "/"}${l ?? "even"}`;
      for (const v of [i + 1, s.tp, s.pp, s.vpp, s.ep, s.etp ?? s.tp, s.cp, s.dp, s.micro_batch_size, s.recompute_granularity, split,
        gib2(p.peak_bytes), gib2(p.headroom_bytes) + (p.tight ? " !" : ""), p.speed.bubble.toFixed(3), p.score.toFixed(3)])
        cell(row, String(v));
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = "Use";
      b.className = "use";
      b.addEventListener("click", () => usePlan(p));
      row.insertCell().appendChild(b);
    });
    $("plans").hidden = doc.plans.length === 0;
    planState("done");
  }

  function fill(parent, values) {
    for (const v of values) {
      const o = document.createElement("option");
      o.value = o.textContent = v;
      parent.appendChild(o);
    }
  }

  createMme().then((module) => {
    engine = module;
    // The form's fields from the setup schema: an enum's values fill its list (its "not set"
    // spelling is the empty choice); the URL's state and the request follow the same table.
    fields = call({ command: "form" }).fields;
    intFields = fields.filter((f) => f.kind === "int").map((f) => f.id);
    selectFields = fields.filter((f) => $(f.id).tagName === "SELECT").map((f) => f.id);
    checkFields = fields.filter((f) => $(f.id).type === "checkbox");
    const textFields = fields.filter((f) => f.kind === "text").map((f) => f.id);
    hashFields = [...intFields, ...textFields, ...selectFields, "gpu", "hub_id"];
    for (const f of fields) if (!$(f.id).title) $(f.id).title = f.help;
    for (const f of fields.filter((f) => f.kind === "enum")) {
      $(f.id).replaceChildren(Object.assign(document.createElement("option"), { value: "", textContent: f.null_name }));
      fill($(f.id), f.values);
      $(f.id).title = f.help;
    }
    fill($("bundled"), call({ command: "models" }).models);
    fill($("gpu"), call({ command: "gpus" }).gpus.map((g) => g.name));
    fill($("plan_gpu"), call({ command: "gpus" }).gpus.map((g) => g.name));
    $("plan_run").addEventListener("click", runPlan);
    $("plan_stop").addEventListener("click", stopPlan);
    planState("idle");
    readHash();
    $("form").addEventListener("input", recompute);
    $("form").addEventListener("change", recompute);
    $("edit_config").addEventListener("click", () => {
      $("config_text").value = call({ command: "config", model: $("model").value }).config;
      $("model").value = "@config";
      recompute();
    });
    $("config_file").addEventListener("change", async (e) => {
      const file = e.target.files[0];
      if (!file) return;
      $("config_text").value = await file.text();
      if (mode() === "bundled") $("model").value = "@config";
      recompute();
    });
    $("hub_fetch").addEventListener("click", fetchHub);
    $("keep").addEventListener("click", keep);
    $("copy_command").addEventListener("click", () => {
      const done = (text) => {
        $("copy_command").textContent = text;
        setTimeout(() => ($("copy_command").textContent = "Copy the command"), 2000);
      };
      if (!navigator.clipboard) return done("Copy: select the command above");
      navigator.clipboard.writeText($("cli-command").textContent).then(() => done("Copied"), () => done("Copy: select the command above"));
    });
    recompute();
  }, (e) => showError("the engine did not load: " + e));
})();
