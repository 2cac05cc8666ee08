#include "mme/engine/pipeline.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

#include "thread_instance.hpp"

namespace mme {

namespace {

// Expands "(tt|)*6" and "t*3" the way pipeline_parallel_layer_layout.py does, appending to `out`
// (the caller splits it on '|'). An item is expanded in place and then repeated from where it
// starts, so nothing is built twice (the planner's engine calls parse thousands of layouts).
void expand_layout(const std::string& text, std::size_t& pos, int depth, std::string& out) {
  constexpr std::size_t kMaxExpanded = 1'000'000;
  if (depth > 16) throw LayoutError("--pipeline-layout: parentheses nested too deeply");
  while (pos < text.size()) {
    const char c = text[pos];
    if (c == ')') {
      if (depth == 0) throw LayoutError("--pipeline-layout: ')' without '('");
      ++pos;
      return;
    }
    const std::size_t item = out.size();
    if (c == '(') {
      ++pos;
      expand_layout(text, pos, depth + 1, out);
    } else if (c == ',' || c == ' ') {
      ++pos;
      continue;
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
      out += c;
      ++pos;
    } else {
      throw LayoutError(
          fmt::format("--pipeline-layout: unexpected character '{}' at position {} (use E, t, m, L, |, "
                      "(...) and *N)",
                      c, pos));
    }
    if (pos < text.size() && text[pos] == '*') {
      ++pos;
      const std::size_t start = pos;
      long n = 0;
      for (; pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])); ++pos)
        if (pos - start < 6) n = n * 10 + (text[pos] - '0');
      if (start == pos) throw LayoutError("--pipeline-layout: '*' must be followed by a count");
      if (pos - start > 6) throw LayoutError("--pipeline-layout: repeat count too large");
      if (n <= 0) throw LayoutError("--pipeline-layout: repeat count must be positive");
      const std::size_t length = out.size() - item;
      if (item + length * static_cast<std::size_t>(n) > kMaxExpanded)
        throw LayoutError("--pipeline-layout: the expanded layout is too long");
      out.reserve(item + length * static_cast<std::size_t>(n));
      for (long i = 1; i < n; ++i) out.append(out, item, length);
    }
    if (out.size() > kMaxExpanded) throw LayoutError("--pipeline-layout: the expanded layout is too long");
  }
  if (depth != 0) throw LayoutError("--pipeline-layout: '(' without ')'");
}

std::vector<LayoutStage> parse_layout_text(const std::string& layout);

}  // namespace

const std::vector<LayoutStage>& parse_pipeline_layout_cached(const std::string& layout) {
  // The planner's engine calls parse the same few layout strings over and over (the setup's
  // checks and the partition, in both passes): the last text parsed on this thread is kept.
  struct Last {
    std::string text;
    std::vector<LayoutStage> stages;
  };
  Last& last = thread_instance<Last>();
  if (!last.stages.empty() && layout == last.text) return last.stages;
  last.stages.clear();  // a text that fails to parse leaves nothing behind
  last.stages = parse_layout_text(layout);
  last.text = layout;
  return last.stages;
}

std::vector<LayoutStage> parse_pipeline_layout(const std::string& layout) {
  return parse_pipeline_layout_cached(layout);
}

namespace {

std::vector<LayoutStage> parse_layout_text(const std::string& layout) {
  std::size_t pos = 0;
  std::string flat;
  expand_layout(layout, pos, 0, flat);
  std::vector<LayoutStage> stages(1);
  for (char c : flat) {
    LayoutStage& s = stages.back();
    switch (c) {
      case '|': stages.emplace_back(); break;
      case 'E':
        if (s.embedding) throw LayoutError("--pipeline-layout: 'E' twice in one stage");
        s.embedding = true;
        break;
      case 't': ++s.decoder; break;
      case 'm': ++s.mtp; break;
      case 'L':
        if (s.loss) throw LayoutError("--pipeline-layout: 'L' twice in one stage");
        s.loss = true;
        break;
      default: break;
    }
  }
  // pipeline_parallel_layer_layout.py validate_layer_layout, on the layout without its '|': the
  // first layer the embedding, the last the loss, no decoder layer after an MTP layer.
  const std::size_t first = flat.find_first_not_of('|'), last = flat.find_last_not_of('|');
  if (first != std::string::npos && flat[first] != 'E')
    throw LayoutError(
        fmt::format("--pipeline-layout: the first layer must be the embedding 'E', not '{}'", flat[first]));
  if (last != std::string::npos && flat[last] != 'L')
    throw LayoutError(fmt::format("--pipeline-layout: the last layer must be the loss 'L', not '{}'", flat[last]));
  if (const std::size_t m = flat.find('m'); m != std::string::npos && flat.find('t', m) != std::string::npos)
    throw LayoutError("--pipeline-layout: a decoder layer 't' comes after an MTP layer 'm'");
  // A trailing '|' leaves an empty last stage only if the text ends in '|'; Megatron keeps it
  // as an empty stage, and so do we.
  return stages;
}

}  // namespace

std::shared_ptr<const PipelinePartition> partition_pipeline_cached(std::int64_t num_layers, std::int64_t mtp_layers,
                                                                   const ParallelLayout& parallel,
                                                                   const PipelineSplit& split) {
  struct Last {
    std::int64_t num_layers = -1, mtp_layers = -1;
    ParallelLayout parallel;
    PipelineSplit split;
    std::shared_ptr<const PipelinePartition> partition;
  };
  Last& last = thread_instance<Last>();
  if (last.partition && last.num_layers == num_layers && last.mtp_layers == mtp_layers && last.parallel == parallel &&
      last.split == split)
    return last.partition;
  last.partition.reset();  // arguments that fail to partition leave nothing behind
  auto partition =
      std::make_shared<const PipelinePartition>(partition_pipeline(num_layers, mtp_layers, parallel, split));
  last.num_layers = num_layers;
  last.mtp_layers = mtp_layers;
  last.parallel = parallel;
  last.split = split;
  last.partition = partition;
  return partition;
}

PipelinePartition partition_pipeline(std::int64_t L, std::int64_t M, const ParallelLayout& parallel,
                                     const PipelineSplit& split) {
  const std::int64_t p = parallel.pp;
  PipelinePartition out;
  out.pp = p;
  // Every chunk holds a decoder layer, an MTP layer, the embedding or the loss: more chunks
  // than that only add empty ones, whose lists (and per-stage output) would grow without limit.
  const std::int64_t max_chunks = L + M + 2;
  // `what` names the count; it is called only to word the error (the planner's hot path
  // passes here on every estimate).
  auto check_chunks = [&](std::int64_t n, const auto& what) {
    if (n > max_chunks)
      throw LayoutError(
          fmt::format("{} is more than the model's {} layers{} plus the embedding and the loss: at "
                      "least one pipeline chunk would hold nothing",
                      what(), L, M > 0 ? fmt::format(" and {} MTP layers", M) : ""));
  };

  if (!split.layout.empty()) {
    if (split.first_stage_layers || split.last_stage_layers || split.account_for_embedding || split.account_for_loss)
      throw LayoutError(
          "--pipeline-layout cannot be combined with first/last-stage layer counts or the "
          "account-for-embedding/loss options");
    const auto& stages = parse_pipeline_layout_cached(split.layout);
    const auto n = static_cast<std::int64_t>(stages.size());
    if (n % p != 0)
      throw LayoutError(fmt::format("--pipeline-layout has {} stages, which is not a multiple of --pp {}", n, p));
    check_chunks(n, [&] { return fmt::format("--pipeline-layout has {} stages, which", n); });
    const std::int64_t v = n / p;
    if (parallel.vpp != 1 && parallel.vpp != v)
      throw LayoutError(
          fmt::format("--pipeline-layout gives {} virtual stages per pipeline rank but --vpp is {}", v, parallel.vpp));
    std::int64_t decoders = 0, mtps = 0, embeddings = 0, losses = 0;
    bool seen_mtp = false;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto& s = stages[static_cast<std::size_t>(i)];
      if (s.decoder > 0 && seen_mtp)
        throw LayoutError("--pipeline-layout: a decoder layer 't' comes after an MTP layer 'm'");
      if (s.mtp > 0) seen_mtp = true;
      decoders += s.decoder;
      mtps += s.mtp;
      embeddings += s.embedding;
      losses += s.loss;
    }
    if (!stages.front().embedding || embeddings != 1)
      throw LayoutError("--pipeline-layout: the embedding 'E' must appear once, in the first stage");
    if (!stages.back().loss || losses != 1)
      throw LayoutError("--pipeline-layout: the loss 'L' must appear once, in the last stage");
    if (decoders != L)
      throw LayoutError(fmt::format("--pipeline-layout has {} decoder layers 't' but the model has {}", decoders, L));
    if (mtps != M)
      throw LayoutError(fmt::format("--pipeline-layout has {} MTP layers 'm' but the model has {}", mtps, M));
    // validate_layer_layout: the MTP layers all in one stage, the last virtual stage of its rank.
    for (std::int64_t i = 0; i < n; ++i) {
      const auto& s = stages[static_cast<std::size_t>(i)];
      if (s.mtp == 0) continue;
      if (i / p != v - 1)
        throw LayoutError(
            fmt::format("--pipeline-layout: MTP layers in virtual stage {} of pipeline rank {}; "
                        "Megatron-LM keeps them in the last virtual stage of a rank ({})",
                        i / p, i % p, v - 1));
      if (s.mtp != M)
        throw LayoutError(
            fmt::format("--pipeline-layout: {} of the {} MTP layers in one stage; Megatron-LM "
                        "keeps all of them in one virtual pipeline stage",
                        s.mtp, M));
    }
    out.vpp = v;
    out.chunks.resize(static_cast<std::size_t>(p * v));
    std::int64_t offset = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto& s = stages[static_cast<std::size_t>(i)];
      const std::int64_t vpp_rank = i / p, pp_rank = i % p;
      ChunkLayout& c = out.chunks[static_cast<std::size_t>(pp_rank * v + vpp_rank)];
      c.first_layer = offset;
      c.num_layers = s.decoder;
      c.mtp_layers = s.mtp;
      // The word embedding lives on the first stage and on the stage that runs MTP
      // (gpt_model.py: pre_process or mtp_process).
      c.embedding = s.embedding || s.mtp > 0;
      c.loss = s.loss;
      offset += s.decoder;
    }
    return out;
  }

  const std::int64_t v = parallel.vpp;
  out.vpp = v;
  check_chunks(p * v, [&] { return fmt::format("--pp {} x --vpp {} = {} pipeline chunks", p, v, p * v); });
  const bool uneven = split.first_stage_layers.has_value() || split.last_stage_layers.has_value();
  if (uneven) {
    if (split.account_for_embedding || split.account_for_loss)
      throw LayoutError(
          "--num-layers-in-first/last-pipeline-stage cannot be combined with "
          "--account-for-embedding/loss-in-pipeline-split");
    // With one stage transformer_config.py takes a first (or last) stage of all the layers; both
    // counts would make one stage two.
    if (p == 1 && split.first_stage_layers && split.last_stage_layers)
      throw LayoutError(
          "--num-layers-in-first-pipeline-stage and --num-layers-in-last-pipeline-stage with --pp 1: "
          "the first stage is the last, give at most one of them");
    const std::int64_t first = split.first_stage_layers.value_or(-1);
    const std::int64_t last = split.last_stage_layers.value_or(-1);
    // transformer_config.py __post_init__ (uneven PP): each given count must be larger than 0.
    const bool bad_first = split.first_stage_layers && first <= 0;
    if (bad_first || (split.last_stage_layers && last <= 0))
      throw LayoutError(fmt::format("--num-layers-in-{}-pipeline-stage must be larger than 0, got {}",
                                    bad_first ? "first" : "last", bad_first ? first : last));
    if (first > L || last > L)
      throw LayoutError(fmt::format("the first/last pipeline stages take more layers ({}) than the model has ({})",
                                    std::max(first, last), L));
    std::int64_t rest = L;
    std::int64_t others = p;
    if (split.first_stage_layers) rest -= first, --others;
    if (split.last_stage_layers) rest -= last, --others;
    if (rest < 0)
      throw LayoutError(
          fmt::format("the first/last pipeline stages take more layers ({}) than the model has ({})", L - rest, L));
    std::int64_t middle = 0;
    if (others == 0) {
      if (rest != 0)
        throw LayoutError(fmt::format("with --pp {} the first and last stages must hold all {} layers; they hold {}", p,
                                      L, L - rest));
    } else {
      // "Mismatch: ... middle layers remaining but ... middle PP stages available".
      if (rest == 0)
        throw LayoutError(
            fmt::format("the first/last pipeline stages hold all {} layers, leaving none for the other {} "
                        "pipeline stage{}: Megatron-LM refuses empty middle stages",
                        L, others, others == 1 ? "" : "s"));
      if (rest % others != 0)
        throw LayoutError(
            fmt::format("the {} layers left after the first/last stages do not split evenly over the "
                        "other {} pipeline stages",
                        rest, others));
      middle = rest / others;
    }
    // The layers of pipeline rank r.
    auto per_rank = [&](std::int64_t r) {
      if (r == 0 && split.first_stage_layers) return first;
      if (r == p - 1 && split.last_stage_layers) return last;
      return middle;
    };
    for (std::int64_t r = 0; r < p; ++r) {
      if (per_rank(r) % v != 0)
        throw LayoutError(fmt::format("pipeline stage {} holds {} layers, which do not split into --vpp {} chunks", r,
                                      per_rank(r), v));
    }
    out.chunks.resize(static_cast<std::size_t>(p * v));
    std::int64_t offset = 0;
    for (std::int64_t vr = 0; vr < v; ++vr) {
      for (std::int64_t r = 0; r < p; ++r) {
        ChunkLayout& c = out.chunks[static_cast<std::size_t>(r * v + vr)];
        c.first_layer = offset;
        c.num_layers = per_rank(r) / v;
        offset += c.num_layers;
      }
    }
  } else {
    const std::int64_t extra = split.accounted_blocks();
    const std::int64_t slots = L + extra;
    if (slots % (p * v) != 0) {
      if (v == 1) {
        const std::int64_t base = L / p;
        throw LayoutError(fmt::format(
            "{} layers{} do not split evenly over --pp {}; set --num-layers-in-first-pipeline-stage and/or "
            "--num-layers-in-last-pipeline-stage (e.g. --num-layers-in-last-pipeline-stage {} gives {} x {} + {})",
            L, extra ? fmt::format(" (+{} for embedding/loss accounting)", extra) : "", p, L - base * (p - 1), p - 1,
            base, L - base * (p - 1)));
      }
      throw LayoutError(
          fmt::format("{} layers{} do not split evenly over --pp {} x --vpp {} = {} chunks; set "
                      "--num-layers-in-first-pipeline-stage / --num-layers-in-last-pipeline-stage or "
                      "--pipeline-layout",
                      L, extra ? fmt::format(" (+{} for embedding/loss accounting)", extra) : "", p, v, p * v));
    }
    const std::int64_t per_chunk = slots / (p * v);
    out.chunks.resize(static_cast<std::size_t>(p * v));
    std::int64_t offset = 0;
    for (std::int64_t vr = 0; vr < v; ++vr) {
      for (std::int64_t r = 0; r < p; ++r) {
        ChunkLayout& c = out.chunks[static_cast<std::size_t>(r * v + vr)];
        std::int64_t n = per_chunk;
        if (split.account_for_embedding && r == 0 && vr == 0) --n;
        if (split.account_for_loss && r == p - 1 && vr == v - 1) --n;
        if (n < 0) throw LayoutError("pipeline split leaves a chunk with a negative number of layers");
        c.first_layer = offset;
        c.num_layers = n;
        offset += n;
      }
    }
  }
  out.chunks.front().embedding = true;
  ChunkLayout& last = out.chunks.back();  // pp rank p-1, vpp rank v-1
  last.loss = true;
  last.mtp_layers = M;
  if (M > 0) last.embedding = true;
  return out;
}

std::vector<std::int64_t> inflight_microbatches(std::int64_t p, std::int64_t v, std::int64_t r, std::int64_t m,
                                                std::int64_t group_size, std::int64_t extra_warmup) {
  std::vector<std::int64_t> out;
  inflight_microbatches(out, p, v, r, m, group_size, extra_warmup);
  return out;
}

void inflight_microbatches(std::vector<std::int64_t>& out, std::int64_t p, std::int64_t v, std::int64_t r,
                           std::int64_t m, std::int64_t group_size, std::int64_t extra_warmup) {
  out.assign(static_cast<std::size_t>(v), 0);
  if (p <= 1) {
    // forward_backward_no_pipelining: one micro-batch at a time.
    out[0] = 1;
    return;
  }
  if (v == 1) {
    // 1F1B: warmup = p - r - 1 forward passes, then one more before the first backward.
    const std::int64_t inflight = p - r;
    out[0] = m > 0 ? std::min(inflight, m) : inflight;
    return;
  }
  // Interleaved 1F1B (schedules.py get_pp_rank_microbatches): warmup = 2 (p - r - 1) + (v - 1) G,
  // capped by the total number of chunk forward passes; the peak follows one more forward pass.
  const std::int64_t G = group_size > 0 ? group_size : p;
  std::int64_t total = 2 * (p - r - 1) + (v - 1) * G + extra_warmup + 1;
  // m x v: m is at most the global batch size (2^40) and v at most 2^20, but a total beyond
  // `total` needs no exact product.
  if (m > 0 && m <= total / v) total = std::min(total, m * v);
  // get_schedule_table: groups of G micro-batches, each run chunk by chunk (G forward passes of
  // chunk 0, then of chunk 1, ...); the last group holds the remaining m - F G micro-batches.
  const std::int64_t period = G * v;
  std::int64_t full_groups = total / period;                    // whole groups within the first `total` passes
  if (m > 0) full_groups = std::min(full_groups, (m - 1) / G);  // groups before the last one
  for (auto& x : out) x = full_groups * G;
  std::int64_t rem = total - full_groups * period;
  const std::int64_t last = m > 0 && (full_groups + 1) * G >= m ? m - full_groups * G : G;
  for (std::size_t c = 0; c < out.size() && rem > 0; ++c) {
    const std::int64_t n = std::min(rem, last);
    out[c] += n;
    rem -= n;
  }
}

}  // namespace mme
