// The page of mme in the browser (docs/web.md): the form becomes the `setup` block of
// `mme estimate --json`, mme.js (the engine in WebAssembly) answers with the same document, and
// the result is repainted on every change. The model is a bundled one, a config.json pasted,
// uploaded or edited in place, or one the page fetches from the hub. The form's state is kept in
// the URL's hash (a shareable link; never the config.json text nor the token).
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const intFields = ["tp", "pp", "vpp", "cp", "ep", "etp", "num_gpus", "micro_batch_size", "seq_length",
    "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"];
  const hashFields = [...intFields, "recompute_granularity", "sequence_parallel", "gpu", "hub_id"];
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

  // The equivalent command line (docs/cli.md: each field is the flag of the same name).
  const quote = (w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`);
  function cliWords(setup) {
    const m = mode();
    const words = ["mme", "estimate", m === "bundled" ? $("model").value : m === "@hub" ? $("hub_id").value.trim() : "config.json"];
    for (const id of intFields) if (id in setup) words.push("--" + id.replace(/_/g, "-"), String(setup[id]));
    if (setup.recompute_granularity) words.push("--recompute-granularity", setup.recompute_granularity);
    if ("sequence_parallel" in setup) words.push(setup.sequence_parallel ? "--sequence-parallel" : "--no-sequence-parallel");
    if (!setup.distributed_optimizer) words.push("--no-distributed-optimizer");
    if ($("gpu").value) words.push("--gpu", $("gpu").value);
    return words;
  }

  // A spec file (docs/spec-files.md) for `mme estimate --config FILE`: the model as its `hf` base
  // and the layout as the engine resolved it (doc.setup), so the spec file's own defaults
  // (sequence parallelism off, ...) do not change the estimate.
  function specYaml(doc, modelArg) {
    const s = doc.setup;
    const q = (v) => (typeof v === "string" ? JSON.stringify(v) : String(v));
    const section = (name, fields) =>
      `${name}:\n` + fields.filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => `  ${k}: ${q(v)}\n`).join("");
    return "# mme estimate --config FILE (docs/spec-files.md), written by mme's browser page\n" +
      section("model", [["hf", modelArg]]) +
      section("parallelism", [["tensor_model_parallel_size", s.tp], ["pipeline_model_parallel_size", s.pp],
        ["virtual_pipeline_model_parallel_size", s.vpp], ["context_parallel_size", s.cp],
        ["expert_model_parallel_size", s.ep], ["expert_tensor_parallel_size", s.etp],
        ["num_layers_in_first_pipeline_stage", s.num_layers_in_first_pipeline_stage],
        ["num_layers_in_last_pipeline_stage", s.num_layers_in_last_pipeline_stage]]) +
      section("training", [["micro_batch_size", s.micro_batch_size], ["seq_length", s.seq_length],
        ["sequence_parallel", s.sequence_parallel], ["use_distributed_optimizer", s.distributed_optimizer],
        ["recompute_granularity", s.recompute_granularity === "none" ? null : s.recompute_granularity]]) +
      section("infrastructure", [["world_size", s.num_gpus], ["gpu", $("gpu").value || null]]) +
      section("precision", [["params_dtype", s.precision]]);
  }

  // The choices the model and the rest of the layout allow, offered in the fields' lists and
  // listed under them (the fields stay free; the engine's message explains a refusal). The rules
  // are the engine's layout checks (setup_checks.cpp, pipeline.cpp, the block models'
  // validate()); what TP, EP and ETP must divide comes from the engine ({"command": "limits"}).
  const divisors = (n, max = n) => [...Array(Math.min(n, max)).keys()].map((i) => i + 1).filter((d) => n % d === 0);
  const gcd = (a, b) => (b === 0 ? a : gcd(b, a % b));
  let limits = null;
  function readLimits() {
    const request = { command: "limits" };
    const doc = modelInto(request) ? { error: true } : call(request);
    limits = doc.error ? null : doc;
  }
  const positive = (id, fallback) => (/^\d+$/.test($(id).value.trim()) && Number($(id).value) > 0 ? Number($(id).value) : fallback);
  const count = (id) => (/^\d+$/.test($(id).value.trim()) ? Number($(id).value) : null);  // first/last: 0 is a count
  // Whether Megatron-LM splits L decoder layers (and M MTP layers) over pp x vpp chunks with the
  // first/last stages' counts (null: even).
  function splitOk(L, M, pp, vpp, first, last) {
    if (pp > L || (vpp > 1 && pp === 1) || pp * vpp > L + M + 2) return false;
    if (first === null && last === null) return L % (pp * vpp) === 0;
    if (pp === 1 || first > L || last > L) return false;
    let rest = L, others = pp;
    if (first !== null) (rest -= first), others--;
    if (last !== null) (rest -= last), others--;
    if (rest < 0 || (others === 0 ? rest !== 0 : rest % others !== 0)) return false;
    const middle = others === 0 ? 0 : rest / others;
    return [first ?? middle, middle, last ?? middle].every((n) => n % vpp === 0);
  }
  const listed = (values, max = 16) => (values.length > max ? values.slice(0, max).join(", ") + ", ..." : values.join(", "));
  function offerChoices() {
    const out = {};
    const text = [];
    if (limits) {
      const L = limits.num_layers, M = limits.mtp_layers;
      const tp = positive("tp", 1), pp = positive("pp", 1), vpp = positive("vpp", 1), cp = positive("cp", 1), ep = positive("ep", 1);
      const etp = positive("etp", tp), seq = positive("seq_length", 4096);
      const first = count("num_layers_in_first_pipeline_stage"), last = count("num_layers_in_last_pipeline_stage");
      out.tp = divisors(limits.tp_divides);
      text.push(`TP: ${listed(out.tp)} (divides the heads, query groups and MLP widths)`);
      out.ep = limits.ep_divides ? divisors(limits.ep_divides) : [1];
      if (limits.ep_divides) text.push(`EP: ${listed(out.ep, 12)} (divides ${limits.ep_divides} experts)`);
      out.etp = limits.etp_divides ? divisors(limits.etp_divides, 64) : [];
      if (limits.etp_divides) text.push(`ETP: ${listed(out.etp)} (divides the expert MLP width ${limits.etp_divides}; up to 64)`);
      out.pp = divisors(L).filter((p) => splitOk(L, M, p, 1, null, null));
      text.push(`PP: ${listed(out.pp)} (an even split of ${L} layers; any PP up to ${L} with first/last-stage counts)`);
      out.vpp = pp > 1 ? divisors(L).filter((v) => splitOk(L, M, pp, v, first, last)) : [1];
      if (pp > 1) text.push(`VPP: ${listed(out.vpp)}`);
      const range = [...Array(L + 1).keys()];
      out.first = pp > 1 ? range.filter((f) => splitOk(L, M, pp, vpp, f, last)) : [];
      out.last = pp > 1 ? range.filter((l) => splitOk(L, M, pp, vpp, first, l)) : [];
      if (pp > 1) text.push(`first stage: ${listed(out.first, 12)}; last stage: ${listed(out.last, 12)} layers`);
      const sp = tp > 1 && $("sequence_parallel").value !== "false";
      out.cp = divisors(seq, 1024).filter((c) => (c === 1 || seq % (2 * c) === 0) && (!sp || (seq / c) % tp === 0));
      text.push(`CP: ${listed(out.cp)} (${seq} tokens split in 2 x CP chunks${sp ? ", by TP with sequence parallelism" : ""})`);
      const a = tp * cp * pp, b = etp * ep * pp;
      const unit = (a / gcd(a, b)) * b;
      out.num_gpus = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256, 512, 1024].map((k) => k * unit);
      text.push(`GPUs: a multiple of ${unit} (TP x CP x PP = ${a}, ETP x EP x PP = ${b})`);
    }
    for (const id of ["tp", "pp", "vpp", "cp", "ep", "etp", "num_gpus", "first", "last"]) {
      const values = (out[id] ?? []).join(",");
      if ($("choices").dataset[id] === values) continue;  // the DOM is touched only on a change
      $(`${id}-choices`).replaceChildren(...(out[id] ?? []).map((v) => Object.assign(document.createElement("option"), { value: String(v) })));
      $("choices").dataset[id] = values;
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

  function paint(doc, ms, setup) {
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
    $("cli-command").textContent = cliWords(setup).map(quote).join(" ");
    $("tree").textContent = (doc.breakdown ?? "").replace(/^\n/, "");
    const exported = { ...doc };
    delete exported.svg;
    delete exported.breakdown;
    delete exported.megatron_args;
    delete exported.megatron_args_error;
    if (jsonUrl) URL.revokeObjectURL(jsonUrl);
    jsonUrl = URL.createObjectURL(new Blob([JSON.stringify(exported, null, 2) + "\n"], { type: "application/json" }));
    $("export_json").href = jsonUrl;
    // The chart as `mme estimate --svg FILE` writes it (a standalone file: the XML declaration).
    if (svgUrl) URL.revokeObjectURL(svgUrl);
    svgUrl = URL.createObjectURL(new Blob(['<?xml version="1.0" encoding="UTF-8"?>\n' + (doc.svg ?? "")], { type: "image/svg+xml" }));
    $("export_svg").href = svgUrl;
    if (specUrl) URL.revokeObjectURL(specUrl);
    specUrl = URL.createObjectURL(new Blob([specYaml(doc, cliWords(setup)[2])], { type: "application/yaml" }));
    $("export_spec").href = specUrl;
    // The Megatron-LM launch flags (`mme estimate --print-megatron-args`), or why none exist.
    if (megatronUrl) URL.revokeObjectURL(megatronUrl);
    megatronUrl = doc.megatron_args ? URL.createObjectURL(new Blob([doc.megatron_args], { type: "text/plain" })) : null;
    $("export_megatron").hidden = !megatronUrl;
    if (megatronUrl) $("export_megatron").href = megatronUrl;
    $("megatron-note").textContent = doc.megatron_args_error ? `No Megatron-LM flags: ${doc.megatron_args_error}` : "";
    $("timing").textContent = `computed in ${ms.toFixed(1)} ms`;
  }

  // The state of the form in the URL's hash, and back.
  function writeHash() {
    const p = new URLSearchParams();
    p.set("model", $("model").value);
    for (const id of hashFields) if ($(id).value.trim() !== "") p.set(id, $(id).value.trim());
    if (!$("distributed_optimizer").checked) p.set("distributed_optimizer", "false");
    history.replaceState(null, "", "#" + p.toString());
  }
  function readHash() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    if (p.has("model") && [...$("model").options].some((o) => o.value === p.get("model"))) $("model").value = p.get("model");
    for (const id of [...intFields, "hub_id"]) if (p.has(id)) $(id).value = p.get(id);
    for (const id of ["recompute_granularity", "sequence_parallel", "gpu"])
      if (p.has(id) && [...$(id).options].some((o) => o.value === p.get(id))) $(id).value = p.get(id);
    if (p.has("distributed_optimizer")) $("distributed_optimizer").checked = p.get("distributed_optimizer") !== "false";
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

  let choicesFor = null;
  function recompute() {
    const start = performance.now();
    updateBoxes();
    const key = mode() === "bundled" ? $("model").value : $("config_text").value;
    if (key !== choicesFor) {
      choicesFor = key;
      readLimits();
    }
    offerChoices();
    writeHash();
    lastDoc = null;
    let setup;
    try {
      setup = setupBlock();
    } catch (e) {
      showError(e.message);
      document.body.dataset.state = "error";
      return;
    }
    const m = mode();
    const request = { setup, gpu: $("gpu").value, svg: true, breakdown: true, megatron_args: true };
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
    else paint(doc, ms, setup);
    lastDoc = doc.error ? null : { doc, setup, model: m === "bundled" ? $("model").value : m === "@hub" ? $("hub_id").value : "config.json" };
    document.body.dataset.state = doc.error ? "error" : "ready";
    document.body.dataset.recomputeMs = (performance.now() - start).toFixed(2);
  }

  // The history of the layouts kept; each row restores its form.
  function snapshot() {
    const s = { model: $("model").value, distributed_optimizer: $("distributed_optimizer").checked };
    for (const id of hashFields) s[id] = $(id).value;
    return s;
  }
  function restore(s) {
    $("model").value = s.model;
    for (const id of hashFields) $(id).value = s[id];
    $("distributed_optimizer").checked = s.distributed_optimizer;
    recompute();
  }
  function keep() {
    if (!lastDoc) return;
    const { doc, setup, model } = lastDoc;
    const entry = { state: snapshot(), model, doc, layout: cliWords(setup).slice(3).join(" "), picked: false };
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
    cell(row, cliWords(setup).slice(3).join(" "));
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
    if ($("seq_length").value.trim() !== "") request.setup = { seq_length: Number($("seq_length").value) };
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
  function usePlan(p) {
    const s = p.setup;
    for (const id of intFields) if (id !== "num_gpus" && id !== "seq_length") $(id).value = s[id] ?? "";
    $("num_gpus").value = String(s.num_gpus);
    $("recompute_granularity").value = s.recompute_granularity === "none" ? "" : s.recompute_granularity;
    $("sequence_parallel").value = "";
    $("distributed_optimizer").checked = s.distributed_optimizer;
    $("gpu").value = $("plan_result").dataset.gpu;
    recompute();
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
