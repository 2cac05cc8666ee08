// The browser page of mme (web/, docs/web.md) in headless Chromium, driven by puppeteer-core:
// the page is loaded from file://, a layout is typed into its fields, and the peak and the
// per-stage bytes it shows must equal those of `mme estimate --json` for the same layout (the
// CLI built next to it). An invalid layout must show the engine's message, the one the CLI prints.
//
//   node page_test.mjs --site DIR --mme PATH --chromium PATH --modules DIR --artifacts DIR
// Exit 77 (CTest's skip) when there is no site (emscripten absent) or no Chromium, or 1 (a
// failure) for either when MME_REQUIRE_WEB=1 is in the environment (.ci/run sets it).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1] ?? "";
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

let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? "ok" : "FAIL"}: ${what}`);
  if (!ok) failures++;
};

// The CLI's document for a layout (flags as `mme estimate` takes them).
function cliEstimate(model, flags) {
  return JSON.parse(execFileSync(args.mme, ["estimate", model, ...flags, "--json"], { encoding: "utf8" }));
}
function cliError(model, flags) {
  try {
    execFileSync(args.mme, ["estimate", model, ...flags], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    return { status: e.status, stderr: String(e.stderr) };
  }
  return { status: 0, stderr: "" };
}

const browser = await puppeteer.launch({
  executablePath: args.chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 1000 });
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  const t0 = Date.now();
  await page.goto(pathToFileURL(path.join(args.site, "index.html")).href);
  await page.waitForSelector("body[data-state]", { timeout: 60000 });
  console.log(`first estimate after ${Date.now() - t0} ms (load included)`);

  // Types `fields` (id -> text; "" clears) after picking the model.
  async function setLayout(model, fields) {
    await page.select("#model", model);
    for (const [id, text] of Object.entries(fields)) {
      await page.click(`#${id}`, { clickCount: 3 });
      await page.keyboard.press("Backspace");
      if (text !== "") await page.keyboard.type(text);
    }
  }
  const shown = () =>
    page.evaluate(() => ({
      state: document.body.dataset.state,
      error: document.getElementById("error").hidden ? null : document.getElementById("error").textContent,
      peak: document.getElementById("peak-bytes").textContent,
      stages: [...document.querySelectorAll("#stages tbody tr td.bytes")].map((td) => td.textContent),
    }));

  const cases = [
    { name: "dense", model: "Qwen/Qwen2.5-7B", fields: { tp: "2", pp: "2", ep: "1", num_gpus: "8", num_layers_in_last_pipeline_stage: "" },
      flags: ["--tp", "2", "--pp", "2", "--num-gpus", "8"] },
    { name: "moe_mla", model: "deepseek-ai/DeepSeek-V3",
      fields: { tp: "4", pp: "4", ep: "8", num_gpus: "128", num_layers_in_last_pipeline_stage: "16" },
      flags: ["--tp", "4", "--pp", "4", "--ep", "8", "--num-gpus", "128", "--num-layers-in-last-pipeline-stage", "16"] },
  ];
  for (const c of cases) {
    await setLayout(c.model, c.fields);
    const got = await shown();
    const want = cliEstimate(c.model, c.flags);
    check(got.state === "ready", `${c.name}: the page shows an estimate (${got.error ?? "no error"})`);
    check(got.peak === String(want.peak.total_bytes), `${c.name}: peak ${got.peak} == CLI ${want.peak.total_bytes}`);
    const wantStages = want.stages.map((s) => String(s.total_bytes));
    check(JSON.stringify(got.stages) === JSON.stringify(wantStages),
      `${c.name}: per-stage bytes ${got.stages.join(",")} == CLI ${wantStages.join(",")}`);
    await page.screenshot({ path: path.join(args.artifacts, `${c.name}.png`), fullPage: true });
  }

  // TP 3 does not divide Qwen2.5-7B's 28 attention heads: the page shows the engine's refusal,
  // the text the CLI prints (which adds a hint to `mme plan`).
  await setLayout("Qwen/Qwen2.5-7B", { tp: "3", pp: "1", ep: "1", num_gpus: "3", num_layers_in_last_pipeline_stage: "" });
  const bad = await shown();
  const cli = cliError("Qwen/Qwen2.5-7B", ["--tp", "3", "--num-gpus", "3"]);
  check(bad.state === "error" && bad.error !== null, `invalid layout: the page shows an error (${bad.error})`);
  check(cli.status === 4, `invalid layout: the CLI refuses it as a layout error (exit ${cli.status})`);
  check(bad.error !== null && bad.error.length > 0 && cli.stderr.includes(bad.error),
    `invalid layout: the page's message is the CLI's (${cli.stderr.trim()})`);
  await page.screenshot({ path: path.join(args.artifacts, "invalid.png"), fullPage: true });

  // Per-keystroke recompute time as the page measures it (the engine call).
  await setLayout("deepseek-ai/DeepSeek-V3", { tp: "4", pp: "4", ep: "8", num_gpus: "128", num_layers_in_last_pipeline_stage: "16" });
  console.log(`recompute: ${await page.$eval("#timing", (e) => e.textContent)}`);
  check(pageErrors.length === 0, `no script errors (${pageErrors.join("; ")})`);
} finally {
  await browser.close();
}
process.exit(failures === 0 ? 0 : 1);
