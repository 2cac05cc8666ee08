#include <algorithm>
#include <array>
#include <cmath>
#include <ostream>

#include <fmt/core.h>

#include <mme/inputs/json_schema.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/report/render_estimate.hpp>
#include <mme/report/render_svg.hpp>
#include <mme/sdk/units.hpp>

namespace mme::cli {

std::string hybrid_layers_text(const ModelSpec& model) {
  std::int64_t mamba = 0, attention = 0, mlp = 0, moe = 0;
  const AttentionSpec* mixer = nullptr;
  for (const auto& l : model.layers) {
    const bool no_attention = l.attention.kind == "no_attention", no_mlp = l.mlp.kind == "no_mlp";
    if (!no_attention && !no_mlp) return "";  // a transformer layer: not a one-block hybrid layer
    if (l.attention.kind == "mamba") {
      ++mamba;
      if (!mixer) mixer = &l.attention;
    } else if (!no_attention) {
      ++attention;
    } else {
      ++(l.mlp.num_experts > 0 ? moe : mlp);
    }
  }
  std::string out;
  auto add = [&](std::int64_t n, const std::string& what) {
    if (n > 0) out += (out.empty() ? "" : ", ") + fmt::format("{} {}", n, what);
  };
  add(mamba, mixer ? fmt::format("Mamba ({} heads of {}, {} groups of state {})", mixer->mamba_num_heads,
                                 mixer->mamba_head_dim, mixer->mamba_num_groups, mixer->mamba_state_dim)
                   : "Mamba");
  add(attention, "attention");
  add(mlp, "MLP");
  add(moe, "MoE");
  return out;
}

std::string recompute_text(const RecomputeSettings& r) {
  switch (r.granularity) {
    case RecomputeGranularity::kNone: return "none";
    case RecomputeGranularity::kSelective: return fmt::format("selective ({})", recompute_modules_to_string(r.modules));
    case RecomputeGranularity::kFull:
      return fmt::format("full ({}, {} layer{})", to_string(r.method), r.num_layers, r.num_layers == 1 ? "" : "s");
  }
  return "?";
}

std::string thousands(std::uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

namespace {

const std::string kRule(80, '=');

double gib(std::int64_t b) { return to_gib(b); }

constexpr int kBarWidth = 50;  // terminal cells for the largest of the stage totals and the marker

// The usable memory the terminal bars mark (one line fits there): the chosen GPU, else the
// smallest GPU the peak fits in, else the largest GPU (render_svg.cpp capacity_lines()).
const FitVerdict* bar_marker(const std::vector<FitVerdict>& fits, const HardwareProfile* chosen_gpu) {
  const FitVerdict* best = nullptr;
  for (const auto* l : capacity_lines(fits, chosen_gpu))
    if (!best || l->usable_bytes < best->usable_bytes) best = l;
  return best;
}

std::string ansi_fg(int colour256) { return fmt::format("\033[38;5;{}m", colour256); }
constexpr const char* kReset = "\033[0m";
constexpr int kFitMarkColour = 28;    // #008700, the SVG's line of a GPU that fits
constexpr int kMissMarkColour = 160;  // #d70000, the SVG's line of a GPU that does not

// One stacked bar: weights, gradients, optimizer, activations, other, `kBarWidth` cells for
// `scale` bytes, with the usable memory of `marker` drawn between two cells (red and heavy
// when the stage does not fit under it). The segments end where the running sums round to,
// so their lengths add up to the stage total's; with colour every segment is a run of full
// blocks in its category's colour, without colour each category has its own shade.
std::string stacked_bar(const StageEstimate& s, double scale, const FitVerdict* marker, bool colour) {
  const auto bytes = category_bytes(s);
  const auto& styles = category_styles();
  auto cells_for = [&](double b) { return static_cast<int>(std::lround(b / scale * kBarWidth)); };
  std::array<int, kCategories + 1> edge{};
  double cum = 0;
  for (std::size_t c = 0; c < kCategories; ++c) {
    cum += static_cast<double>(std::max<std::int64_t>(bytes[c], 0));
    edge[c + 1] = std::min(cells_for(cum), kBarWidth);
  }
  if (s.total_bytes > 0 && edge[kCategories] == 0) {  // too small for a cell: show one of its largest part
    const auto largest = static_cast<std::size_t>(std::max_element(bytes.begin(), bytes.end()) - bytes.begin());
    for (std::size_t c = largest + 1; c <= kCategories; ++c) edge[c] = 1;
  }
  const int mark_at = marker ? std::clamp(cells_for(static_cast<double>(marker->usable_bytes)), 0, kBarWidth) : -1;
  const bool over = marker && s.total_bytes > marker->usable_bytes;
  std::array<int, kBarWidth> cat{};  // the category of each cell, -1 past the total
  cat.fill(-1);
  for (std::size_t c = 0; c < kCategories; ++c)
    for (int k = edge[c]; k < edge[c + 1]; ++k) cat[static_cast<std::size_t>(k)] = static_cast<int>(c);
  std::string out;
  for (int k = 0; k <= kBarWidth;) {
    if (k == mark_at) {  // between cell k - 1 and cell k
      if (colour)
        out += (over ? std::string("\033[1m") : std::string()) + ansi_fg(over ? kMissMarkColour : kFitMarkColour);
      out += over ? "┃" : "│";
      if (colour) out += kReset;
    }
    if (k == kBarWidth) break;
    const int c = cat[static_cast<std::size_t>(k)];
    int e = k + 1;
    while (e < kBarWidth && cat[static_cast<std::size_t>(e)] == c && e != mark_at) ++e;
    if (c >= 0 && colour) out += ansi_fg(styles[static_cast<std::size_t>(c)].ansi256);
    for (int i = k; i < e; ++i) out += c < 0 ? " " : colour ? "█" : styles[static_cast<std::size_t>(c)].glyph;
    if (c >= 0 && colour) out += kReset;
    k = e;
  }
  return out;
}

std::string bar_legend(const FitVerdict* marker, bool on_scale, double scale, bool colour) {
  std::string out = "    ";
  for (const auto& st : category_styles()) {
    if (colour)
      out += ansi_fg(st.ansi256) + "█" + kReset;
    else
      out += st.glyph;
    out += fmt::format(" {}  ", st.label);
  }
  out += fmt::format("(1 cell = {:.2f} GiB)\n", scale / kGiB / kBarWidth);
  if (marker) {
    out += "    ";
    if (on_scale) {
      if (colour) out += ansi_fg(marker->fits ? kFitMarkColour : kMissMarkColour);
      out += "│ ";
      if (colour) out += kReset;
    }
    out += fmt::format("usable memory of {}: {:.2f} GiB{}\n", marker->hardware->name, gib(marker->usable_bytes),
                       !on_scale      ? " (off the scale, more than twice the largest stage)"
                       : marker->fits ? ""
                                      : "; ┃ marks the stages that do not fit");
  }
  return out;
}

}  // namespace

// The setup schema's JSON block (framework/src/inputs/setup_schema.cpp).
nlohmann::json setup_to_json(const TrainingSetup& s) { return setup_to_json_block(s); }

nlohmann::json estimate_to_json(const ModelSpec& model, const Estimate& est, const std::vector<FitVerdict>& fits) {
  nlohmann::json j;
  j["schema_version"] = kSchemaVersion;
  const auto& ms = est.model;
  j["model"] = {{"name", ms.name},
                {"family", ms.family},
                {"model_type", ms.model_type},
                {"adapter", ms.adapter},
                {"source", model.source},
                {"num_layers", ms.num_layers},
                {"hidden_size", ms.hidden_size},
                {"padded_vocab_size", ms.padded_vocab_size},
                {"total_params", ms.total_params},
                {"active_params", ms.active_params},
                {"mtp_params", ms.mtp_params}};
  j["setup"] = setup_to_json(est.setup);
  j["attention"] = to_string(est.attention);  // the backend the estimate uses (auto resolved)
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : est.stages) {
    nlohmann::json comps = nlohmann::json::object();
    for (const auto& c : s.components) comps[c.name] = c.bytes;
    nlohmann::json chunks = nlohmann::json::array();
    for (const auto& c : s.chunks)
      chunks.push_back({{"vpp_rank", c.vpp_rank},
                        {"first_layer", c.first_layer},
                        {"num_layers", c.num_layers},
                        {"mtp_layers", c.mtp_layers},
                        {"embedding", c.embedding},
                        {"loss", c.loss},
                        {"inflight_microbatches", c.inflight_microbatches},
                        {"activation_bytes_per_microbatch", c.activation_bytes_per_microbatch}});
    const std::int64_t wg = s.weight_bytes + s.gradient_bytes;
    stages.push_back({
        {"pp_rank", s.pp_rank},
        {"layers", s.layers},
        {"mtp_layers", s.mtp_layers},
        {"parameters", s.parameters},
        {"expert_parameters", s.expert_parameters},
        {"trainable_parameters", s.trainable_parameters},
        {"weight_bytes", s.weight_bytes},
        {"gradient_bytes", s.gradient_bytes},
        {"optimizer_bytes", s.optimizer_bytes},
        {"activation_bytes", s.activation_bytes},
        {"other_bytes", s.other_bytes},
        {"static_bytes", s.static_bytes},
        {"total_bytes", s.total_bytes},
        {"upper_bytes", s.upper_bytes},
        {"forward_backward_bytes", s.forward_backward_bytes},
        {"optimizer_step_bytes", s.optimizer_step_bytes},
        {"step_transient_bytes", s.step_transient_bytes},
        {"peak_phase", s.peak_phase},
        {"inflight_microbatches", s.inflight_microbatches},
        {"chunks", chunks},
        {"components", comps},
        // The seed tool's fields: counts in billions, memory in GiB (it prints "GB").
        {"parameters_b", static_cast<double>(s.parameters) / 1e9},
        {"activation_bytes_b", static_cast<double>(s.activation_bytes) / 1e9},
        // Deprecated (docs/cli.md, "Contracts"; removed in schema_version 2): the seed's
        // "activation elements" as bytes / 2, which holds only for 2-byte activations.
        {"activation_b", static_cast<double>(s.activation_bytes) / 2.0 / 1e9},
        {"weight_grad_gb", gib(wg)},
        {"weight_grad_optim_gb", gib(wg + s.optimizer_bytes)},
        {"activation_gb", gib(s.activation_bytes)},
        {"total_gb", gib(s.total_bytes)},
    });
    if (s.device_bytes > 0) {
      // The device total (docs/memory-model.md, "Reserved memory and the device total").
      auto& js = stages.back();
      nlohmann::json dev = nlohmann::json::object();
      for (const auto& c : s.device_components) dev[c.name] = c.bytes;
      js["reserved_bytes"] = s.reserved_bytes;
      if (s.side_stream_reserved_bytes > 0) js["side_stream_reserved_bytes"] = s.side_stream_reserved_bytes;
      js["outside_pytorch_bytes"] = s.outside_pytorch_bytes;
      js["device_bytes"] = s.device_bytes;
      js["device_upper_bytes"] = s.device_upper_bytes;
      js["device_components"] = dev;
    }
    if (s.cuda_graph_capture_bytes > 0) {
      // With CUDA graphs only (docs/memory-model.md, "CUDA graphs").
      auto& js = stages.back();
      js["cuda_graph_capture_bytes"] = s.cuda_graph_capture_bytes;
      js["cuda_graph_replay_bytes"] = s.cuda_graph_replay_bytes;
      js["cuda_graph_pool_bytes"] = s.cuda_graph_pool_bytes;
    }
  }
  j["stages"] = stages;
  const auto& peak = est.peak();
  j["peak"] = {{"pp_rank", peak.pp_rank},
               {"total_bytes", peak.total_bytes},
               {"total_gb", gib(peak.total_bytes)},
               {"static_bytes", peak.static_bytes},
               {"phase", peak.peak_phase},
               {"upper_bytes", est.upper_bytes()},
               {"upper_gb", gib(est.upper_bytes())},
               {"upper_pp_rank", est.stages.at(est.upper_stage).pp_rank},
               {"bound_terms", est.bound_terms}};
  if (peak.device_bytes > 0) {
    // The allocated peak's stage: its reserved memory and device total; and the stage whose device
    // bound is largest, on which the fit is judged.
    const auto& dev = est.stages.at(est.device_stage);
    j["peak"]["reserved_bytes"] = peak.reserved_bytes;
    j["peak"]["outside_pytorch_bytes"] = peak.outside_pytorch_bytes;
    j["peak"]["device_bytes"] = peak.device_bytes;
    j["peak"]["device_upper_bytes"] = dev.device_upper_bytes;
    j["peak"]["device_pp_rank"] = dev.pp_rank;
    j["peak"]["allocator_config"] = est.allocator_config;
  }
  nlohmann::json fj = nlohmann::json::array();
  for (const auto& f : fits)
    fj.push_back({{"hardware", f.hardware->name},
                  {"judged_on", f.on_bound ? "upper_bound" : "estimate"},
                  {"rule", f.on_device ? "device_total" : "fixed_reserve"},
                  {"needed_bytes", f.needed_bytes},
                  {"capacity_bytes", f.capacity_bytes},
                  {"usable_bytes", f.usable_bytes},
                  {"fits", f.fits},
                  {"headroom_bytes", f.headroom_bytes}});
  j["fits"] = fj;
  nlohmann::json kinds = nlohmann::json::array();
  for (const auto& k : est.layer_kinds) {
    nlohmann::json params = nlohmann::json::object(), acts = nlohmann::json::object();
    for (const auto& c : k.components) (c.category == MemoryCategory::kWeights ? params : acts)[c.name] = c.bytes;
    kinds.push_back({{"attention", k.attention},
                     {"mlp", k.mlp},
                     {"layers", k.layers},
                     {"mtp", k.mtp},
                     {"parameters", k.parameters},
                     {"activation_bytes_per_microbatch", k.activation_bytes_per_microbatch},
                     {"transient_bytes", k.transient_bytes},
                     {"parameter_terms", params},
                     {"activation_terms", acts},
                     {"costs_per_microbatch",
                      {{"forward_flops", k.costs.forward_flops},
                       {"recompute_flops", k.costs.recompute_flops},
                       {"weight_bytes_read", k.costs.weight_bytes},
                       {"collective_bytes",
                        {{"tp", k.costs.tp_bytes},
                         {"cp", k.costs.cp_bytes},
                         {"ep", k.costs.ep_bytes},
                         {"etp", k.costs.etp_bytes}}}}}});
  }
  j["layer_kinds"] = kinds;
  j["assumptions"] = est.assumptions;
  j["warnings"] = model.warnings;
  return j;
}

void render_text(std::ostream& out, const ModelSpec& model, const Estimate& est, const std::vector<FitVerdict>& fits,
                 const RenderOptions& options) {
  const auto& s = est.setup;
  const auto& p = s.parallel;
  const auto& ms = est.model;
  out << kRule << "\nCONFIGURATION SUMMARY\n" << kRule << "\n\n";
  out << fmt::format("Model: {}\n", ms.name);
  out << fmt::format("Model Type: {}\n", ms.model_type.empty() ? ms.family : ms.model_type);
  out << fmt::format("Architecture: {}L-{}H\n", ms.num_layers, ms.hidden_size);
  if (const std::string hybrid = hybrid_layers_text(model); !hybrid.empty())
    out << fmt::format("Hybrid layers: {}\n", hybrid);
  out << fmt::format("Parameters: {} total, {} active{}\n", format_count(ms.total_params),
                     format_count(ms.active_params),
                     ms.mtp_params > 0 ? fmt::format(" (+{} MTP)", format_count(ms.mtp_params)) : "");
  for (const auto& l : model.layers) {
    if (l.mlp.num_experts > 0) {
      out << fmt::format("MoE: {} experts, top-{}", l.mlp.num_experts, l.mlp.top_k);
      if (l.mlp.shared_expert_ffn_hidden_size > 0)
        out << fmt::format(", shared experts of width {}", l.mlp.shared_expert_ffn_hidden_size);
      out << "\n";
      break;
    }
  }
  if (!model.warnings.empty()) {
    // What the model's config sets that the estimate does not follow, and a spec's overrides of
    // its hf: base: said in the report itself, not only on stderr.
    out << "Notes:\n";
    for (const auto& w : model.warnings) out << "  - " << w << "\n";
  }
  out << "\nParallelism:\n";
  out << fmt::format("  TP={}, PP={}, EP={}, CP={}\n", p.tp, p.pp, p.ep, p.cp);
  out << fmt::format("  ETP={}, VPP={}, DP={}, EDP={}, SP={}\n", effective_etp(p), p.vpp, p.dp, p.expert_dp,
                     sequence_parallel_on(p) ? "on" : "off");
  if (!options.etp_note.empty()) out << "  " << options.etp_note << "\n";
  out << "\nTraining:\n";
  out << fmt::format("  Micro Batch Size: {}\n", s.micro_batch_size);
  out << fmt::format("  Sequence Length: {}\n", s.seq_length);
  out << fmt::format("  Total GPUs: {}{}\n", p.world_size, options.gpus_note.empty() ? "" : " " + options.gpus_note);
  if (s.global_batch_size > 0)
    out << fmt::format("  Global Batch Size: {} ({} micro-batches)\n", s.global_batch_size, s.num_micro_batches);
  out << fmt::format("  Distributed Optimizer: {}\n", s.optimizer.distributed ? "True" : "False");
  out << fmt::format("  Recompute: {}\n", recompute_text(s.recompute));
  if (s.lora.on())
    out << fmt::format("  LoRA: rank {} on {} (base weights frozen)\n", s.lora.rank,
                       lora_targets_to_string(s.lora.targets));
  out << fmt::format("  Precision: {}, attention: {}\n", to_string(s.precision), to_string(est.attention));

  out << "\n" << kRule << "\nMEMORY ESTIMATION RESULTS\n" << kRule << "\n";
  // The bars share one scale: the largest stage, or the marked GPU's usable memory when that
  // is larger but not so large that the bars would shrink below half the width.
  const FitVerdict* marker = options.bars ? bar_marker(fits, options.chosen_gpu) : nullptr;
  double scale = 1;
  for (const auto& st : est.stages) scale = std::max(scale, static_cast<double>(st.total_bytes));
  const bool marker_on_scale = marker && static_cast<double>(marker->usable_bytes) <= 2 * scale;
  if (marker_on_scale) scale = std::max(scale, static_cast<double>(marker->usable_bytes));
  for (const auto& st : est.stages) {
    out << fmt::format("\nPipeline Stage {}:\n", st.pp_rank);
    out << fmt::format("  Layers: {}{}, micro-batches in flight: {}\n", st.layers,
                       st.mtp_layers ? fmt::format(" + {} MTP", st.mtp_layers) : "", st.inflight_microbatches);
    out << fmt::format(
        "  Parameters: {:.2f}B{}\n", static_cast<double>(st.parameters) / 1e9,
        st.trainable_parameters == st.parameters
            ? std::string()
            : fmt::format(", trainable {} (LoRA adapters; the rest frozen)", format_count(st.trainable_parameters)));
    // Bytes, in billions: the activations mix dtypes (fp32 logits, 1-byte masks), so no element
    // count follows from them (the seed printed bytes / 2 as "elements").
    out << fmt::format("  Activations: {:.2f}B bytes\n", static_cast<double>(st.activation_bytes) / 1e9);
    out << "  Memory Breakdown:\n";
    const std::int64_t wg = st.weight_bytes + st.gradient_bytes;
    out << fmt::format("    - Weights + Gradients: {:.2f} GiB\n", gib(wg));
    out << fmt::format("    - Weights + Gradients + Optimizer: {:.2f} GiB\n", gib(wg + st.optimizer_bytes));
    out << fmt::format("    - Activations: {:.2f} GiB\n", gib(st.activation_bytes));
    out << fmt::format("    - Other (framework buffers): {:.2f} GiB\n", gib(st.other_bytes));
    out << fmt::format("    - Total: {:.2f} GiB\n", gib(st.total_bytes));
    if (st.device_bytes > 0)
      out << fmt::format(
          "    - Reserved by PyTorch: {:.2f} GiB; device total {:.2f} GiB ({:.2f} GiB outside PyTorch)\n",
          gib(st.reserved_bytes), gib(st.device_bytes), gib(st.outside_pytorch_bytes));
    if (options.bars)
      out << "    " << stacked_bar(st, scale, marker_on_scale ? marker : nullptr, options.colour)
          << fmt::format(" {:.2f} GiB\n", gib(st.total_bytes));
    if (options.verbose) {
      for (const auto& c : st.chunks)
        out << fmt::format("    chunk {}: layers {}-{}{}{}{}, {} micro-batch(es) x {}\n", c.vpp_rank, c.first_layer,
                           c.first_layer + c.num_layers - 1, c.mtp_layers ? fmt::format(" + {} MTP", c.mtp_layers) : "",
                           c.embedding ? " + embedding" : "", c.loss ? " + loss" : "", c.inflight_microbatches,
                           format_bytes(c.activation_bytes_per_microbatch));
      std::vector<Component> comps = st.components;
      std::stable_sort(comps.begin(), comps.end(), [](const Component& a, const Component& b) {
        return a.category != b.category ? a.category < b.category : a.bytes > b.bytes;
      });
      for (const auto& c : comps) out << fmt::format("      {:<58} {:>12}\n", c.name, format_bytes(c.bytes));
      for (const auto& c : st.device_components)
        out << fmt::format("      {:<58} {:>12}\n", c.name.substr(0, 58), format_bytes(c.bytes));
    }
  }
  if (options.bars) out << "\n" << bar_legend(marker, marker_on_scale, scale, options.colour);
  const auto& peak = est.peak();
  out << "\n" << kRule << "\n";
  out << fmt::format("Peak Memory per GPU: {:.2f} GiB (pipeline stage {})\n", gib(peak.total_bytes), peak.pp_rank);
  out << fmt::format("Peak phase: {}\n", peak.peak_phase);
  out << fmt::format("Upper bound: {:.2f} GiB (pipeline stage {}){}\n", gib(est.upper_bytes()),
                     est.stages.at(est.upper_stage).pp_rank,
                     est.bound_terms.empty() ? ": nothing uncertain found, the bound is the estimate" : "");
  for (const auto& t : est.bound_terms) out << "  + " << t << "\n";
  if (peak.device_bytes > 0) {
    const auto& dev = est.stages.at(est.device_stage);
    out << fmt::format("Reserved by PyTorch: {:.2f} GiB (pipeline stage {}; caching allocator{})\n",
                       gib(peak.reserved_bytes), peak.pp_rank,
                       est.allocator_config.empty() ? "" : ", PYTORCH_CUDA_ALLOC_CONF=" + est.allocator_config);
    out << fmt::format(
        "Device total: {:.2f} GiB (reserved + {:.2f} GiB outside PyTorch: CUDA context, NCCL{}); "
        "upper bound {:.2f} GiB (pipeline stage {})\n",
        gib(peak.device_bytes), gib(peak.outside_pytorch_bytes),
        peak.outside_pytorch_bytes > 0 && dev.outside_allocator_bytes > 0 ? ", TE userbuffers" : "",
        gib(dev.device_upper_bytes), dev.pp_rank);
  }
  if (!fits.empty()) {
    const char* what = fits.front().on_device ? "the device total's upper bound" : "the upper bound";
    if (!fits.front().on_bound) what = fits.front().on_device ? "the device total" : "the point estimate";
    out << fmt::format("Fit judged on {}{}\n", what,
                       fits.front().on_device
                           ? " against the capacity (--headroom / --overhead-per-gpu: the fixed reserve)"
                       : fits.front().on_bound ? " (--fit-on estimate for the point estimate)"
                                               : " (--fit-on estimate)");
  }
  std::string fit_names, miss_names;
  for (const auto& f : fits) {
    if (f.fits)
      fit_names += (fit_names.empty() ? "" : ", ") + f.hardware->name;
    else
      miss_names += (miss_names.empty() ? "" : ", ") + f.hardware->name;
  }
  const char* ok = options.colour ? "\033[32m✓\033[0m" : "✓";
  const char* bad = options.colour ? "\033[31m✗\033[0m" : "✗";
  // What each GPU leaves for the estimate: its memory less the CUDA context / NCCL reserve
  // (--overhead-per-gpu) and the headroom share (--headroom).
  auto usable_text = [](const FitVerdict& f) {
    if (f.on_device) return fmt::format("{:.2f} GiB capacity", gib(f.capacity_bytes));
    return fmt::format("{:.2f} GiB usable of {:.2f}, {:.2f} GiB reserved + {:g} % headroom", gib(f.usable_bytes),
                       gib(f.capacity_bytes), gib(f.reserved_bytes), f.headroom_fraction * 100);
  };
  if (options.chosen_gpu && !fits.empty()) {
    const auto& f = fits.front();
    out << fmt::format("{} {} {}: {:.2f} GiB needed, {}; {:.2f} GiB {}\n", f.fits ? ok : bad,
                       f.fits ? "Fits in" : "Does not fit", f.hardware->name, gib(f.needed_bytes), usable_text(f),
                       gib(f.headroom_bytes < 0 ? -f.headroom_bytes : f.headroom_bytes), f.fits ? "to spare" : "short");
  } else if (!fits.empty()) {
    if (!fit_names.empty())
      out << fmt::format("{} Fits in: {}\n", ok, fit_names);
    else
      out << fmt::format("{} Exceeds every known GPU ({})\n", bad, miss_names);
    out << fmt::format("  {:.2f} GiB needed per GPU ({}); usable memory of each GPU:\n", gib(fits.front().needed_bytes),
                       fits.front().on_device
                           ? (fits.front().on_bound ? "the device total's upper bound" : "the device total")
                       : fits.front().on_bound ? "the upper bound"
                                               : "the point estimate");
    std::size_t width = 0;
    for (const auto& f : fits) width = std::max(width, f.hardware->name.size());
    for (const auto& f : fits)
      out << fmt::format("    {} {:<{}}  {}\n", f.fits ? ok : bad, f.hardware->name, width, usable_text(f));
    if (fit_names.empty() || !miss_names.empty())
      out << "  (--headroom 0 and --overhead-per-gpu GIB set what is kept free; the seed's \"< 80 GB\" rule is "
             "--headroom 0 --overhead-per-gpu 0)\n";
  }
  if (!options.next_steps.empty()) {
    out << "Next step (the smallest change that fits first):\n";
    for (const auto& st : options.next_steps) out << "  " << st << "\n";
  }
  out << kRule << "\n";
  if (options.verbose && !est.layer_kinds.empty()) {
    out << "\nLayer kinds (one layer on one rank, one micro-batch):\n";
    for (const auto& k : est.layer_kinds) {
      out << fmt::format("  {} + {}{}: {} parameters, {} of activations, {} transient\n", k.attention, k.mlp,
                         k.mtp ? " (MTP)" : fmt::format(" x {} layers", k.layers), format_count(k.parameters),
                         format_bytes(k.activation_bytes_per_microbatch), format_bytes(k.transient_bytes));
      const LayerCosts& lc = k.costs;
      auto bytes = [](double b) { return format_bytes(static_cast<std::int64_t>(b)); };
      out << fmt::format("    costs: {:.3g} forward FLOPs, {} of weights read, {} sent (TP {}, CP {}, EP {}, ETP {})\n",
                         lc.forward_flops, bytes(lc.weight_bytes),
                         bytes(lc.tp_bytes + lc.cp_bytes + lc.ep_bytes + lc.etp_bytes), bytes(lc.tp_bytes),
                         bytes(lc.cp_bytes), bytes(lc.ep_bytes), bytes(lc.etp_bytes));
      for (const auto& c : k.components)
        out << fmt::format("      {:<58} {:>12}\n", c.name,
                           c.category == MemoryCategory::kWeights ? format_count(c.bytes) : format_bytes(c.bytes));
    }
  }
  if (options.verbose) {
    out << "\nAssumptions:\n";
    for (const auto& a : est.assumptions) out << "  - " << a << "\n";
  }
}

namespace {

// A node of the component tree: the bytes of everything under it.
struct TreeNode {
  std::int64_t bytes = 0;
  std::vector<std::string> names;  // of the children, in first-seen order
  std::vector<TreeNode> children;
  TreeNode& child(const std::string& name) {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return children[i];
    names.push_back(name);
    return children.emplace_back();
  }
  void drop_empty() {
    for (std::size_t i = names.size(); i-- > 0;)
      if (children[i].children.empty() && children[i].bytes == 0) {
        names.erase(names.begin() + static_cast<std::ptrdiff_t>(i));
        children.erase(children.begin() + static_cast<std::ptrdiff_t>(i));
      }
  }
};

void print_tree(std::ostream& out, const TreeNode& node, const std::string& prefix) {
  for (std::size_t i = 0; i < node.children.size(); ++i) {
    const std::string& name = node.names[i];
    const TreeNode& child = node.children[i];
    const bool last = i + 1 == node.children.size();
    const std::string label = prefix + (last ? "└─ " : "├─ ") + name;
    out << fmt::format("{:<60} {:>12}\n", label, format_bytes(child.bytes));
    print_tree(out, child, prefix + (last ? "   " : "│  "));
  }
}

}  // namespace

void render_module_tree(std::ostream& out, const ModelSpec& model, const Estimate& est) {
  out << "\nModule tree (one rank of each pipeline stage; sizes in GiB = 2^30 bytes)\n";
  const LayerKinds kinds = group_layer_kinds(model);
  for (const auto& st : est.stages) {
    out << fmt::format("\nPipeline Stage {}: {} peak ({}), {} micro-batch(es) of the first chunk in flight\n",
                       st.pp_rank, format_bytes(st.total_bytes), st.peak_phase, st.inflight_microbatches);
    // Memory: every component under its category and block ("activations/attention/kv").
    TreeNode memory;
    for (const char* category : {"weights", "gradients", "optimizer", "activations", "other"})
      (void)memory.child(category);
    for (const auto& c : st.components) {
      TreeNode* node = &memory;
      std::size_t start = 0;
      for (;;) {
        const std::size_t slash = c.name.find('/', start);
        node = &node->child(c.name.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
        node->bytes += c.bytes;
        if (slash == std::string::npos) break;
        start = slash + 1;
      }
    }
    memory.drop_empty();
    print_tree(out, memory, "  ");
    // Modules: each chunk's embedding, runs of decoder layers of one kind, MTP, output layer.
    out << "  modules (parameters of one rank; activations kept by one micro-batch)\n";
    for (std::size_t ci = 0; ci < st.chunks.size(); ++ci) {
      const auto& ch = st.chunks[ci];
      const bool last_chunk = ci + 1 == st.chunks.size();
      out << fmt::format("  {} chunk {}: {}\n", last_chunk ? "└─" : "├─", ch.vpp_rank,
                         ch.num_layers > 0
                             ? fmt::format("layers {}-{}, {} micro-batch(es) in flight", ch.first_layer,
                                           ch.first_layer + ch.num_layers - 1, ch.inflight_microbatches)
                             : fmt::format("no decoder layer, {} micro-batch(es) in flight", ch.inflight_microbatches));
      const std::string pad = last_chunk ? "   " : "│  ";
      std::vector<std::string> lines;
      if (ch.embedding) lines.push_back("embedding (word embedding; its weights are in weights/dense)");
      // Runs of consecutive layers of one kind.
      for (std::int64_t i = ch.first_layer; i < ch.first_layer + ch.num_layers;) {
        const std::size_t k = kinds.kind_of_layer.at(static_cast<std::size_t>(i));
        std::int64_t j = i;
        while (j < ch.first_layer + ch.num_layers && kinds.kind_of_layer.at(static_cast<std::size_t>(j)) == k) ++j;
        const std::int64_t n = j - i;
        if (k < est.layer_kinds.size()) {
          const auto& lk = est.layer_kinds[k];
          lines.push_back(fmt::format("layers {}-{}: {} x {} + {}, {} parameters, {} activations ({} and {} per layer)",
                                      i, j - 1, n, lk.attention, lk.mlp, format_count(lk.parameters * n),
                                      format_bytes(lk.activation_bytes_per_microbatch * n), format_count(lk.parameters),
                                      format_bytes(lk.activation_bytes_per_microbatch)));
        }
        i = j;
      }
      if (ch.mtp_layers > 0) {
        for (const auto& lk : est.layer_kinds)
          if (lk.mtp)
            lines.push_back(fmt::format("MTP: {} x {} + {}, {} parameters, {} activations ({} and {} per layer)",
                                        ch.mtp_layers, lk.attention, lk.mlp,
                                        format_count(lk.parameters * ch.mtp_layers),
                                        format_bytes(lk.activation_bytes_per_microbatch * ch.mtp_layers),
                                        format_count(lk.parameters), format_bytes(lk.activation_bytes_per_microbatch)));
      }
      if (ch.loss) lines.push_back("output layer and loss (final norm, logits; their weights are in weights/dense)");
      lines.push_back(fmt::format("activations of the chunk: {} per micro-batch",
                                  format_bytes(ch.activation_bytes_per_microbatch)));
      for (std::size_t li = 0; li < lines.size(); ++li)
        out << "  " << pad << (li + 1 == lines.size() ? "└─ " : "├─ ") << lines[li] << "\n";
    }
  }
}

}  // namespace mme::cli
