// The browser page of mme (web/, docs/web.md) in headless Chromium, driven by puppeteer-core:
// the page is loaded from file://, a layout is typed into its fields, and what it shows (peak,
// upper bound, per-stage bytes, the peak stage's components, the SVG chart, the JSON export, the
// command line it offers) must equal what `mme estimate` (the CLI built next to it) gives for the
// same layout. Invalid layouts and broken config.json files must show the CLI's message. The hub
// is never reached: puppeteer's request interception serves a bundled config.json instead, and
// any other request off file:// fails the test.
//
//   node page_test.mjs --site DIR --mme PATH --chromium PATH --modules DIR --models DIR --artifacts DIR
// Exit 77 (CTest's skip) when there is no site (emscripten absent) or no Chromium, or 1 (a
// failure) for either when MME_REQUIRE_WEB=1 is in the environment (.ci/run sets it).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1] ?? "";
for (const k of ["mme", "models"]) if (args[k]) args[k] = path.resolve(args[k]);  // the CLI runs in a temporary folder
const required = process.env.MME_REQUIRE_WEB === "1";
function missing(what) {
  console.log(required ? `FAIL: ${what}, and MME_REQUIRE_WEB=1 asks for the page test` : `SKIP: ${what}`);
  process.exit(required ? 1 : 77);
}
if (!args.site || !existsSync(path.join(args.site, "index.html"))) missing("no web site was built (emscripten not found)");
if (!args.chromium || !existsSync(args.chromium)) missing("no Chromium");
const require = createRequire(path.join(path.resolve(args.modules), "index.js"));
const puppeteer = require("puppeteer-core");
mkdirSync(args.artifacts, { recursive: true });
const tmp = mkdtempSync(path.join(os.tmpdir(), "mme-web-test-"));

let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? "ok" : "FAIL"}: ${what}`);
  if (!ok) failures++;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// The CLI's document for a layout (flags as `mme estimate` takes them), run in `cwd`.
function cliEstimate(model, flags, cwd = tmp) {
  return JSON.parse(execFileSync(args.mme, ["estimate", model, ...flags, "--json"], { encoding: "utf8", cwd }));
}
function cliError(model, flags, cwd = tmp) {
  try {
    execFileSync(args.mme, ["estimate", model, ...flags], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], cwd });
  } catch (e) {
    return { status: e.status, stderr: String(e.stderr) };
  }
  return { status: 0, stderr: "" };
}
const bundledConfig = (name) => readFileSync(path.join(args.models, name.replace("/", "--"), "config.json"), "utf8");

const browser = await puppeteer.launch({
  executablePath: args.chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu"],  // no --allow-file-access-from-files: the page as a user opens it
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 1000 });
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));

  // No request leaves file:// but those to the hub, which are answered here: <endpoint>/<id>/
  // resolve/main/config.json with the bundled config.json of <id> (a 404 for an unknown id).
  const hubRequests = [];
  const stray = [];
  await page.setRequestInterception(true);
  page.on("request", (req) => {
    const url = req.url();
    if (url.startsWith("file:") || url.startsWith("blob:") || url.startsWith("data:")) return req.continue();
    const cors = { "Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "authorization" };
    const m = url.match(/^https:\/\/(huggingface\.co|hub\.example\.test\/mirror)\/([\w.-]+\/[\w.-]+)\/resolve\/main\/config\.json$/);
    if (!m) {
      stray.push(url);
      return req.abort();
    }
    if (req.method() === "OPTIONS") return req.respond({ status: 204, headers: cors });
    hubRequests.push({ url, authorization: req.headers().authorization ?? null });
    const file = path.join(args.models, m[2].replace("/", "--"), "config.json");
    if (!existsSync(file)) return req.respond({ status: 404, headers: cors, contentType: "text/plain", body: "not found" });
    return req.respond({ status: 200, headers: cors, contentType: "application/json", body: readFileSync(file, "utf8") });
  });

  const t0 = Date.now();
  await page.goto(pathToFileURL(path.join(args.site, "index.html")).href);
  await page.waitForSelector("body[data-state]", { timeout: 60000 });
  const loadMs = Date.now() - t0;
  console.log(`first estimate after ${loadMs} ms (load included)`);

  // Types `fields` (id -> text; "" clears) after picking the model.
  async function setLayout(model, fields, p = page) {
    await p.select("#model", model);
    for (const [id, text] of Object.entries(fields)) {
      await p.click(`#${id}`, { clickCount: 3 });
      await p.keyboard.press("Backspace");
      if (text !== "") await p.keyboard.type(text);
    }
  }
  // Pastes text into the config.json editor (one input event, as a paste gives).
  const paste = (text) =>
    page.$eval("#config_text", (el, t) => {
      el.value = t;
      el.dispatchEvent(new Event("input", { bubbles: true }));
    }, text);
  const blobText = (id, p = page) => p.$eval(`#${id}`, async (a) => (await fetch(a.href)).text());
  const shown = (p = page) =>
    p.evaluate(() => ({
      state: document.body.dataset.state,
      error: document.getElementById("error").hidden ? null : document.getElementById("error").textContent,
      peak: document.getElementById("peak-bytes").textContent,
      upper: document.getElementById("upper-bytes").textContent,
      stages: [...document.querySelectorAll("#stages tbody tr td.bytes")].map((td) => td.textContent),
      componentsStage: document.getElementById("components-stage").textContent,
      components: Object.fromEntries([...document.querySelectorAll("#components tbody tr")].map(
        (tr) => [tr.dataset.key, tr.querySelector("td.bytes").textContent])),
      command: document.getElementById("cli-command").textContent,
      chartBars: document.querySelectorAll("#chart svg").length,
    }));
  // The page's numbers against the CLI's document.
  function compare(name, got, want) {
    check(got.state === "ready", `${name}: the page shows an estimate (${got.error ?? "no error"})`);
    check(got.peak === String(want.peak.total_bytes), `${name}: peak ${got.peak} == CLI ${want.peak.total_bytes}`);
    check(got.upper === String(want.peak.upper_bytes), `${name}: upper bound ${got.upper} == CLI ${want.peak.upper_bytes}`);
    const wantStages = want.stages.map((s) => String(s.total_bytes));
    check(JSON.stringify(got.stages) === JSON.stringify(wantStages),
      `${name}: per-stage bytes ${got.stages.join(",")} == CLI ${wantStages.join(",")}`);
    const peakStage = want.stages.find((s) => s.pp_rank === want.peak.pp_rank);
    const wantComps = Object.fromEntries(Object.entries(peakStage.components).map(([k, v]) => [k, String(v)]));
    check(got.componentsStage === String(want.peak.pp_rank) &&
      JSON.stringify(Object.entries(got.components).sort()) === JSON.stringify(Object.entries(wantComps).sort()),
      `${name}: the ${Object.keys(wantComps).length} components of peak stage ${want.peak.pp_rank} == CLI's`);
  }
  // The command line the page offers, run: it must give the page's numbers.
  function runShownCommand(name, command, got, cwd = tmp) {
    const words = command.split(" ").map((w) => w.replace(/^'(.*)'$/, "$1"));
    check(words[0] === "mme" && words[1] === "estimate", `${name}: the page offers an mme estimate command (${command})`);
    const doc = JSON.parse(execFileSync(args.mme, [...words.slice(1), "--json"], { encoding: "utf8", cwd }));
    check(String(doc.peak.total_bytes) === got.peak, `${name}: \`${command}\` gives the page's peak (${doc.peak.total_bytes})`);
  }

  const cases = [
    { name: "dense", model: "Qwen/Qwen2.5-7B",
      fields: { tp: "2", pp: "2", ep: "1", num_gpus: "8", num_layers_in_first_pipeline_stage: "", num_layers_in_last_pipeline_stage: "" },
      flags: ["--tp", "2", "--pp", "2", "--num-gpus", "8"] },
    { name: "moe_mla", model: "deepseek-ai/DeepSeek-V3",
      fields: { tp: "4", pp: "4", ep: "8", num_gpus: "128", num_layers_in_first_pipeline_stage: "", num_layers_in_last_pipeline_stage: "16" },
      flags: ["--tp", "4", "--pp", "4", "--ep", "8", "--num-gpus", "128", "--num-layers-in-last-pipeline-stage", "16"] },
    // Uneven pipeline: Qwen2.5-7B's 28 layers as 4 + 8 + 8 + 8 on 4 stages.
    { name: "uneven_pp", model: "Qwen/Qwen2.5-7B",
      fields: { tp: "1", pp: "4", ep: "1", num_gpus: "8", num_layers_in_first_pipeline_stage: "4", num_layers_in_last_pipeline_stage: "8" },
      flags: ["--pp", "4", "--num-gpus", "8", "--num-layers-in-first-pipeline-stage", "4", "--num-layers-in-last-pipeline-stage", "8"] },
  ];
  for (const c of cases) {
    await setLayout(c.model, c.fields);
    const got = await shown();
    const want = cliEstimate(c.model, c.flags);
    compare(c.name, got, want);
    if (c.name === "uneven_pp") {
      const layers = await page.$$eval("#stages tbody tr", (rows) => rows.map((r) => r.cells[1].textContent));
      check(layers.join(",") === want.stages.map((s) => s.layers).join(",") && layers.join(",") === "4,8,8,8",
        `${c.name}: layers per stage ${layers.join(",")} == CLI's (4,8,8,8)`);
    }
    runShownCommand(c.name, got.command, got);
    // The exports: the JSON document (the CLI's but next_steps), the chart as `--svg FILE` writes it.
    const exported = JSON.parse(await blobText("export_json"));
    // Not compared: model.source (the file read: the module's /models/... against the CLI's
    // share/mme/models/...). next_steps is compared: the page lists them when nothing fits.
    for (const doc of [exported, want]) delete doc.model.source;
    const steps = await page.$$eval("#next-steps li", (lis) => lis.map((li) => li.textContent));
    check(steps.length === want.next_steps.length && want.next_steps.every((st, i) => steps[i].startsWith(st.change)),
      `${c.name}: the page lists the CLI's ${want.next_steps.length} next steps (${want.next_steps.map((st) => st.change).join("; ")})`);
    const differing = Object.keys({ ...want, ...exported }).filter((k) => JSON.stringify(exported[k]) !== JSON.stringify(want[k]));
    check(differing.length === 0, `${c.name}: the exported JSON document == \`mme estimate --json\`'s (differing: ${differing.join(", ") || "none"})`);
    // The module tree: the one `mme estimate --breakdown` prints after its report.
    const tree = await page.$eval("#tree", (e) => e.textContent);
    const cliTree = execFileSync(args.mme, ["estimate", c.model, ...c.flags, "--breakdown"], { encoding: "utf8", cwd: tmp });
    check(tree.length > 0 && tree.includes("Pipeline Stage") && cliTree.endsWith(tree), `${c.name}: the module tree is \`--breakdown\`'s`);
    const svgFile = path.join(tmp, `${c.name}.svg`);
    execFileSync(args.mme, ["estimate", c.model, ...c.flags, "--svg", svgFile], { stdio: "ignore" });
    check(got.chartBars === 1 && (await blobText("export_svg")) === readFileSync(svgFile, "utf8"),
      `${c.name}: the chart is \`mme estimate --svg\`'s`);
    // The spec file: `mme estimate --config FILE` gives the same stages.
    const specFile = path.join(tmp, `${c.name}.yaml`);
    writeFileSync(specFile, await blobText("export_spec"));
    const fromSpec = JSON.parse(execFileSync(args.mme, ["estimate", "--config", specFile, "--json"], { encoding: "utf8", cwd: tmp }));
    check(JSON.stringify(fromSpec.stages.map((s) => s.total_bytes)) === JSON.stringify(want.stages.map((s) => s.total_bytes)) &&
      fromSpec.peak.upper_bytes === want.peak.upper_bytes, `${c.name}: the exported spec file, run with --config, gives the page's stages`);
    // The Megatron-LM launch flags: `mme estimate --print-megatron-args`'s argument file.
    const launch = execFileSync(args.mme, ["estimate", c.model, ...c.flags, "--print-megatron-args"], { encoding: "utf8", cwd: tmp });
    const megatronNote = await page.$eval("#megatron-note", (e) => e.textContent);
    const megatronShown = await page.$eval("#export_megatron", (a) => !a.hidden);
    check(megatronShown && (await blobText("export_megatron")) === launch,
      `${c.name}: the Megatron-LM flags are \`--print-megatron-args\`'s (${megatronNote || "no note"})`);
    await page.screenshot({ path: path.join(args.artifacts, `${c.name}.png`), fullPage: true });
  }

  // Every bundled model, on 8 GPUs with the defaults: the page's numbers are the CLI's.
  const bundled = (await page.$$eval("#model option", (os) => os.map((o) => o.value))).filter((v) => !v.startsWith("@"));
  check(bundled.length >= 20, `the page lists the ${bundled.length} bundled models`);
  for (const model of bundled) {
    await setLayout(model, { tp: "1", pp: "1", ep: "1", num_gpus: "8", num_layers_in_first_pipeline_stage: "", num_layers_in_last_pipeline_stage: "" });
    compare(`every model: ${model}`, await shown(), cliEstimate(model, ["--num-gpus", "8"]));
  }

  // TP 3 does not divide Qwen2.5-7B's 28 attention heads: the page shows the engine's refusal,
  // the text the CLI prints (which adds a hint to `mme plan`).
  await setLayout("Qwen/Qwen2.5-7B", { tp: "3", pp: "1", ep: "1", num_gpus: "3", num_layers_in_first_pipeline_stage: "", num_layers_in_last_pipeline_stage: "" });
  const bad = await shown();
  const cli = cliError("Qwen/Qwen2.5-7B", ["--tp", "3", "--num-gpus", "3"]);
  check(bad.state === "error" && bad.error !== null, `invalid layout: the page shows an error (${bad.error})`);
  check(cli.status === 4, `invalid layout: the CLI refuses it as a layout error (exit ${cli.status})`);
  check(bad.error !== null && bad.error.length > 0 && cli.stderr.includes(bad.error),
    `invalid layout: the page's message is the CLI's (${cli.stderr.trim()})`);
  await page.screenshot({ path: path.join(args.artifacts, "invalid.png"), fullPage: true });
  // The TP choices the page offers are the ones the CLI's message lists ("one of 1, 2 or 4").
  const listed = cli.stderr.match(/one of ([\d, or]+) \(/)?.[1].split(/, | or /).join(",");
  const offered = await page.$eval("#choices", (e) => e.dataset.tp);
  check(listed !== undefined && offered === listed, `choices: TP offered ${offered} == the CLI's ${listed}`);
  await setLayout("deepseek-ai/DeepSeek-V3", {});
  const offeredEp = await page.$eval("#choices", (e) => e.dataset.ep);
  check(offeredEp === "1,2,4,8,16,32,64,128,256", `choices: EP offered for DeepSeek-V3's 256 experts (${offeredEp})`);

  // Only valid choices: the values the page offers for PP, VPP, the stage counts, CP, ETP and the
  // GPU count, within a range, are exactly those the CLI accepts (exit 0) in that range.
  const base = { tp: "1", pp: "1", vpp: "1", cp: "1", ep: "1", etp: "1", num_gpus: "8", seq_length: "4096",
    num_layers_in_first_pipeline_stage: "", num_layers_in_last_pipeline_stage: "" };
  async function sameChoices(name, model, fields, key, range, flagsFor) {
    await setLayout(model, { ...base, ...fields });
    const got = (await page.$eval("#choices", (e, k) => e.dataset[k], key)).split(",").filter(Boolean).map(Number);
    const shownInRange = got.filter((v) => range.includes(v));
    const want = range.filter((v) => cliError(model, flagsFor(String(v))).status === 0);
    check(shownInRange.length > 0 && JSON.stringify(shownInRange) === JSON.stringify(want),
      `choices: ${name} offered ${shownInRange.join(",")} == the CLI accepts ${want.join(",")}`);
  }
  const upTo = (a, b) => [...Array(b - a + 1).keys()].map((i) => i + a);
  await sameChoices("PP (Qwen2.5-7B, 28 layers)", "Qwen/Qwen2.5-7B", {}, "pp", upTo(1, 30), (v) => ["--pp", v, "--num-gpus", v]);
  await sameChoices("VPP (PP 2)", "Qwen/Qwen2.5-7B", { pp: "2" }, "vpp", upTo(1, 16),
    (v) => ["--pp", "2", "--vpp", v, "--num-gpus", "2"]);
  await sameChoices("last-stage layers (PP 3)", "Qwen/Qwen2.5-7B", { pp: "3" }, "last", upTo(0, 29),
    (v) => ["--pp", "3", "--num-gpus", "3", "--num-layers-in-last-pipeline-stage", v]);
  await sameChoices("first-stage layers (PP 4, last 8)", "Qwen/Qwen2.5-7B", { pp: "4", num_layers_in_last_pipeline_stage: "8" },
    "first", upTo(0, 29), (v) => ["--pp", "4", "--num-gpus", "4", "--num-layers-in-last-pipeline-stage", "8",
      "--num-layers-in-first-pipeline-stage", v]);
  await sameChoices("CP (TP 2, 4096 tokens)", "Qwen/Qwen2.5-7B", { tp: "2" }, "cp", upTo(1, 32),
    (v) => ["--tp", "2", "--cp", v, "--num-gpus", String(2 * Number(v))]);
  await sameChoices("GPU count (TP 2, PP 2)", "Qwen/Qwen2.5-7B", { tp: "2", pp: "2" }, "num_gpus", upTo(1, 12),
    (v) => ["--tp", "2", "--pp", "2", "--num-gpus", v]);
  await sameChoices("ETP (Mixtral-8x7B)", "mistralai/Mixtral-8x7B-v0.1", {}, "etp", upTo(1, 16), (v) => ["--etp", v, "--num-gpus", v]);
  await sameChoices("GPU count (Mixtral, TP 2, EP 8, ETP 1)", "mistralai/Mixtral-8x7B-v0.1", { tp: "2", ep: "8" }, "num_gpus", upTo(1, 20),
    (v) => ["--tp", "2", "--ep", "8", "--etp", "1", "--num-gpus", v]);
  await page.screenshot({ path: path.join(args.artifacts, "choices.png"), fullPage: true });
  await setLayout("Qwen/Qwen2.5-7B", base);

  // config.json in the editor: the bundled one copied in ("Edit its config.json"), then edited
  // (24 layers), then broken JSON, then without num_hidden_layers. The CLI reads the same text
  // as ./config.json.
  await setLayout("Qwen/Qwen2.5-7B", { tp: "2", pp: "2", num_gpus: "8" });
  await page.click("#edit_config");
  const edited = await page.$eval("#config_text", (el) => el.value);
  check(edited === bundledConfig("Qwen/Qwen2.5-7B") && (await page.$eval("#model", (s) => s.value)) === "@config",
    "config.json: 'Edit its config.json' puts the bundled file in the editor");
  const cfg = JSON.parse(edited);
  cfg.num_hidden_layers = 24;
  const configCases = [
    { name: "config_edited", text: JSON.stringify(cfg, null, 2) },
    { name: "config_broken", text: edited.slice(0, edited.length / 2) },
    { name: "config_no_layers", text: JSON.stringify({ ...cfg, num_hidden_layers: undefined }) },
  ];
  for (const c of configCases) {
    await paste(c.text);
    writeFileSync(path.join(tmp, "config.json"), c.text);
    const got = await shown();
    if (c.name === "config_edited") {
      compare(c.name, got, cliEstimate("config.json", ["--tp", "2", "--pp", "2", "--num-gpus", "8"]));
      runShownCommand(c.name, got.command, got);
    } else {
      const err = cliError("config.json", ["--tp", "2", "--pp", "2", "--num-gpus", "8"]);
      check(got.state === "error" && err.status === 3 && err.stderr.trim() === `mme: error: ${got.error}`,
        `${c.name}: the page's message is the CLI's (${got.error} / ${err.stderr.trim()})`);
    }
    await page.screenshot({ path: path.join(args.artifacts, `${c.name}.png`), fullPage: true });
  }
  check((await shown()).error?.includes("num_hidden_layers"), "config_no_layers: the message names num_hidden_layers");

  // The hub: the page fetches <endpoint>/<id>/resolve/main/config.json itself, with the token.
  await page.select("#model", "@hub");
  await setLayout("@hub", { hub_id: "Qwen/Qwen2.5-7B", tp: "2", pp: "2", num_gpus: "8" });
  await page.click("#hub_fetch");
  await page.waitForSelector('body[data-hub="done"]');
  let got = await shown();
  compare("hub", got, cliEstimate("Qwen/Qwen2.5-7B", ["--tp", "2", "--pp", "2", "--num-gpus", "8"]));
  check(got.command.startsWith("mme estimate Qwen/Qwen2.5-7B "), `hub: the command names the hub id (${got.command})`);
  check(hubRequests.length === 1 && hubRequests[0].url === "https://huggingface.co/Qwen/Qwen2.5-7B/resolve/main/config.json" &&
    hubRequests[0].authorization === null, `hub: one request to the hub, no token (${JSON.stringify(hubRequests)})`);
  await setLayout("@hub", { hub_endpoint: "https://hub.example.test/mirror/", hub_token: "hf_secret", hub_id: "deepseek-ai/DeepSeek-V3" });
  await page.evaluate(() => delete document.body.dataset.hub);
  await page.click("#hub_fetch");
  await page.waitForSelector('body[data-hub="done"]');
  check(hubRequests.length === 2 && hubRequests[1].url === "https://hub.example.test/mirror/deepseek-ai/DeepSeek-V3/resolve/main/config.json" &&
    hubRequests[1].authorization === "Bearer hf_secret", `hub: the endpoint and the token are used (${JSON.stringify(hubRequests[1])})`);
  check(!page.url().includes("hf_secret"), "hub: the token is not in the URL");
  await page.evaluate(() => delete document.body.dataset.hub);
  await setLayout("@hub", { hub_id: "nobody/none" });
  await page.click("#hub_fetch");
  await page.waitForSelector('body[data-hub="done"]');
  const status = await page.$eval("#hub_status", (e) => e.textContent);
  check(status.includes("404"), `hub: a missing model says so (${status})`);
  await page.screenshot({ path: path.join(args.artifacts, "hub.png"), fullPage: true });

  // History and the URL: keep two layouts, restore the first; the URL opens the same estimate.
  await setLayout("deepseek-ai/DeepSeek-V3", { tp: "4", pp: "4", ep: "8", num_gpus: "128", num_layers_in_last_pipeline_stage: "16" });
  const first = await shown();
  await page.click("#keep");
  const link = page.url();
  await setLayout("Qwen/Qwen2.5-7B", { tp: "2", pp: "2", ep: "1", num_gpus: "8", num_layers_in_last_pipeline_stage: "" });
  await page.click("#keep");
  const rows = await page.$$eval("#history tbody tr", (trs) => trs.map((tr) => tr.cells[2].textContent));
  check(rows.join("|") === "deepseek-ai/DeepSeek-V3|Qwen/Qwen2.5-7B", `history: two rows (${rows.join(", ")})`);
  // The compare view: both rows ticked, side by side; each column's per-stage peaks, peak and
  // bound are the CLI's for that layout.
  check(await page.$eval("#compare-box", (e) => e.hidden), "compare: hidden until two layouts are ticked");
  for (const box of await page.$$("#history tbody input.pick")) await box.click();
  const compared = await page.$$eval("#compare tbody tr[data-key]", (trs) =>
    Object.fromEntries(trs.map((tr) => [tr.dataset.key, [...tr.cells].slice(1).map((td) => td.dataset.bytes ?? td.textContent)])));
  const wantCompare = [cliEstimate("deepseek-ai/DeepSeek-V3", cases[1].flags), cliEstimate("Qwen/Qwen2.5-7B", cases[0].flags)];
  const expectCompare = { peak: wantCompare.map((d) => String(d.peak.total_bytes)), upper: wantCompare.map((d) => String(d.peak.upper_bytes)) };
  for (let r = 0; r < 4; r++) expectCompare[`stage${r}`] = wantCompare.map((d) => (d.stages[r] ? String(d.stages[r].total_bytes) : ""));
  check(Object.keys(expectCompare).every((k) => JSON.stringify(compared[k]) === JSON.stringify(expectCompare[k])) &&
    !(await page.$eval("#compare-box", (e) => e.hidden)),
    `compare: the two columns are the CLI's stages, peaks and bounds (${JSON.stringify(compared)})`);
  await page.click("#history tbody tr:first-child button.restore");
  check((await shown()).peak === first.peak, "history: Restore gives the first layout's estimate back");
  const other = await browser.newPage();
  await other.goto(link);
  await other.waitForSelector("body[data-state]", { timeout: 60000 });
  const opened = await shown(other);
  check(link.includes("#") && opened.peak === first.peak && opened.command === first.command,
    `url: the link opens the same estimate (${link.slice(link.indexOf("#"))})`);
  await other.close();
  await page.screenshot({ path: path.join(args.artifacts, "history.png"), fullPage: true });

  // The planner, in its Web Worker: the page's plans for Qwen2.5-7B on 16 H100s are those of
  // `mme plan ... --json` (the same layouts, counts and figures; the speed figures within 1e-9
  // relative, as the browser's libm may round differently). "Use" puts the best plan in the form.
  const planDoc = () => page.$eval("#plan_result", (e) => JSON.parse(e.dataset.doc));
  async function plan(model, gpus, gpu) {
    await setLayout(model, { tp: "1", pp: "1", vpp: "1", cp: "1", ep: "1", etp: "1", num_gpus: "8", micro_batch_size: "1",
      seq_length: "4096", num_layers_in_first_pipeline_stage: "", num_layers_in_last_pipeline_stage: "", pipeline_layout: "" });
    // The switches a plan's "Use" may have set, back to their defaults (off).
    for (const id of ["account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split", "overlap_grad_reduce",
      "overlap_param_gather", "tp_comm_overlap"])
      if (await page.$eval(`#${id}`, (el) => el.checked)) await page.click(`#${id}`);
    await page.select("#recompute_granularity", "");
    await page.select("#gpu", "");
    await page.evaluate(() => delete document.body.dataset.plan);
    await page.$eval("#plan_num_gpus", (el, v) => (el.value = v), String(gpus));
    await page.select("#plan_gpu", gpu);
    await page.click("#plan_run");
  }
  const cliPlan = (model, gpus, gpu) =>
    JSON.parse(execFileSync(args.mme, ["plan", model, "--num-gpus", String(gpus), "--gpu", gpu, "--seq-length", "4096",
      "--top", "10", "--threads", "1", "--json"], { encoding: "utf8", cwd: tmp }));
  function samePlans(name, got, want) {
    const close = (a, b) => (typeof a === "number" && typeof b === "number" ? Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b))
      : a === null || typeof a !== "object" ? a === b
      : Object.keys({ ...a, ...b }).every((k) => close(a[k], b[k])));
    for (const doc of [got, want]) delete doc.elapsed_s;
    check(got.plans.length > 0 && JSON.stringify(got.plans[0].args) === JSON.stringify(want.plans[0].args),
      `${name}: the page's top plan is \`mme plan --json\`'s (${want.plans[0]?.args.join(" ")})`);
    const differing = Object.keys({ ...want, ...got }).filter((k) => !close(got[k], want[k]));
    check(differing.length === 0, `${name}: the page's plan document == \`mme plan --json\`'s (differing: ${differing.join(", ") || "none"})`);
  }
  await plan("Qwen/Qwen2.5-7B", 16, "H100-SXM-80GB");
  await page.waitForSelector('body[data-plan="done"]', { timeout: 120000 });
  const smallPlan = await planDoc();
  const smallElapsed = smallPlan.elapsed_s;
  const smallWant = cliPlan("Qwen/Qwen2.5-7B", 16, "H100-SXM-80GB");
  samePlans("plan", smallPlan, smallWant);
  const firstRow = await page.$$eval("#plans tbody tr:first-child td", (tds) => tds.slice(1, 4).map((td) => td.textContent));
  check(firstRow.join(",") === [smallWant.plans[0].setup.tp, smallWant.plans[0].setup.pp, smallWant.plans[0].setup.vpp].join(","),
    `plan: the table's first row is the top plan (TP, PP, VPP ${firstRow.join(", ")})`);
  await page.click("#plans tbody tr:first-child button.use");
  const used = await shown();
  check(used.state === "ready" && used.peak === String(smallWant.plans[0].peak_bytes),
    `plan: "Use" gives the plan's peak in the form (${used.peak} == ${smallWant.plans[0].peak_bytes})`);
  const differs = await page.evaluate(() => document.body.dataset.planDiffers);
  check(differs === "", `plan: after "Use" the page's setup is the plan's, key for key (differing: ${differs || "none"})`);
  await page.screenshot({ path: path.join(args.artifacts, "plan.png"), fullPage: true });

  // The page stays responsive while a larger search runs (Mixtral on 64 H100s): once the worker
  // has reported progress, a key typed in the form is handled (a new estimate) before the plan
  // is done; then the plan equals the CLI's too. Stop ends a running search.
  await plan("mistralai/Mixtral-8x7B-v0.1", 64, "H100-SXM-80GB");
  const planT0 = Date.now();
  await page.waitForFunction(() => Number(document.body.dataset.planProgress) >= 1 || document.body.dataset.plan !== "running",
    { timeout: 120000 });
  const before = await page.evaluate(() => ({ plan: document.body.dataset.plan, ms: document.body.dataset.recomputeMs }));
  await page.click("#micro_batch_size", { clickCount: 3 });
  await page.keyboard.type("2");
  const during = await page.evaluate(() => ({ plan: document.body.dataset.plan, state: document.body.dataset.state }));
  const typedPeak = (await shown()).peak;
  const wantTyped = cliEstimate("mistralai/Mixtral-8x7B-v0.1", ["--micro-batch-size", "2", "--num-gpus", "8", "--seq-length", "4096"]);
  check(before.plan === "running" && during.plan === "running" && during.state === "ready" &&
    typedPeak === String(wantTyped.peak.total_bytes),
    `plan: a key typed while the plan runs is handled at once (plan ${before.plan}/${during.plan}, peak ${typedPeak})`);
  await page.waitForSelector('body[data-plan="done"]', { timeout: 240000 });
  const planMs = Date.now() - planT0;
  const progressCount = await page.evaluate(() => document.body.dataset.planProgress);
  const bigPlan = await planDoc();
  console.log(`planner: Mixtral-8x7B on 64 H100s, ${bigPlan.evaluated} layouts in ${planMs} ms in the page ` +
    `(${progressCount} progress messages); Qwen2.5-7B on 16: ${smallPlan.evaluated} layouts in ${smallElapsed.toFixed(2)} s (the planner's own time)`);
  samePlans("plan_moe", bigPlan, cliPlan("mistralai/Mixtral-8x7B-v0.1", 64, "H100-SXM-80GB"));
  check(Number(progressCount) >= 1, `plan: the worker reported progress (${progressCount} messages)`);
  await plan("mistralai/Mixtral-8x7B-v0.1", 64, "H100-SXM-80GB");
  await page.click("#plan_stop");
  check((await page.evaluate(() => document.body.dataset.plan)) === "stopped", "plan: Stop ends the search");

  // Per-keystroke recompute: the time from a key in the micro-batch field (1 -> 12 -> 1 ...) to
  // the next frame (measured here, round trips to the browser included) and the page's own
  // handler time (engine, chart and tables).
  await setLayout("deepseek-ai/DeepSeek-V3", { micro_batch_size: "1" });
  const wall = [];
  const handler = [];
  for (let i = 0; i < 20; i++) {
    const k0 = Date.now();
    if (i % 2 === 0) await page.keyboard.type("2");
    else await page.keyboard.press("Backspace");
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0))));
    wall.push(Date.now() - k0);
    handler.push(Number(await page.evaluate(() => document.body.dataset.recomputeMs)));
  }
  console.log(`recompute: ${await page.$eval("#timing", (e) => e.textContent)}; keystroke to frame median ${median(wall)} ms ` +
    `(max ${Math.max(...wall)}), page handler median ${median(handler).toFixed(1)} ms (max ${Math.max(...handler).toFixed(1)})`);
  check(median(handler) < 50, `keystroke: the page's recompute (engine, chart and tables) takes ${median(handler).toFixed(1)} ms < 50 ms`);
  // A phone's width (390 px, headless: not a real phone): nothing makes the page wider than the
  // screen (the tables and the chart scroll inside their boxes), the chart keeps a readable width.
  await setLayout("deepseek-ai/DeepSeek-V3", { tp: "2", pp: "8", ep: "32", num_gpus: "512", micro_batch_size: "1",
    num_layers_in_first_pipeline_stage: "", num_layers_in_last_pipeline_stage: "5" });
  await page.setViewport({ width: 390, height: 844, deviceScaleFactor: 2 });
  const narrow = await page.evaluate(() => ({ page: document.documentElement.scrollWidth,
    chart: document.querySelector("#chart svg").getBoundingClientRect().width }));
  check(narrow.page <= 390 && narrow.chart >= 600, `phone: the page stays 390 px wide (${narrow.page}), the chart ${narrow.chart} px in its scroll box`);
  await page.screenshot({ path: path.join(args.artifacts, "phone.png"), fullPage: true });
  await page.setViewport({ width: 1280, height: 1000 });
  check(stray.length === 0, `no request but the hub's (${stray.join(", ")})`);
  check(pageErrors.length === 0, `no script errors (${pageErrors.join("; ")})`);
} finally {
  await browser.close();
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(failures === 0 ? 0 : 1);
