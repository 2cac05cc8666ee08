#include "mme/validate/baselines.hpp"

#include <algorithm>
#include <cmath>

#include "mme/engine/estimator.hpp"

namespace mme {

// A transcription of theoretical_memory_usage.py's compute_weight_and_optimizer_memory and
// compute_activation_memory[_without_sp] (megatron-memory-mechanics.md §1.2, §1.4, §1.5).
std::int64_t megatron_theoretical_memory(const ModelSpec& m, const TrainingSetup& s) {
  const auto& p = s.parallel;
  const double h = static_cast<double>(m.hidden_size);
  const double t = static_cast<double>(p.tp), pp = static_cast<double>(p.pp);
  const double V = static_cast<double>(padded_vocab_size(m.vocab_size, s.make_vocab_size_divisible_by, p.tp));
  const double nu = m.normalization == Normalization::kLayerNorm ? 2.0 : 1.0;
  const double gamma = m.gated_linear_unit ? 1.5 : 1.0;
  double ffn = 0;
  for (const auto& l : m.layers) ffn = std::max(ffn, static_cast<double>(l.mlp.ffn_hidden_size));
  if (ffn == 0) ffn = 4 * h;

  // The tools' formulas know multi-latent attention by its low-rank KV projection (the fields
  // the mla block requires), not by a block kind's name.
  auto attention = [&](const AttentionSpec& a) {
    const double n = static_cast<double>(a.num_heads);
    if (a.kv_lora_rank > 0) {
      const double dq = static_cast<double>(a.qk_head_dim + a.qk_pos_emb_head_dim);
      const double q = a.q_lora_rank ? static_cast<double>(*a.q_lora_rank) * (h + n * dq + nu) : h * n * dq;
      const double kv_r = static_cast<double>(a.kv_lora_rank);
      return q + kv_r * (h + n * static_cast<double>(a.qk_head_dim + a.v_head_dim) + nu) +
             h * static_cast<double>(a.qk_pos_emb_head_dim) + n * static_cast<double>(a.v_head_dim) * h;
    }
    const double d = static_cast<double>(a.kv_channels), g = static_cast<double>(a.num_query_groups);
    return 2 * h * n * d + 2 * h * g * d;
  };
  double tp_block = 0, rep_block = 0, exp_block = 0;
  auto add_layer = [&](const LayerSpec& l, double scale, double& tp_part, double& rep_part, double& exp_part) {
    const double A = attention(l.attention);
    const double layernorm = 2 * h * nu;
    if (l.mlp.num_experts > 0) {
      const double E = static_cast<double>(l.mlp.num_experts);
      tp_part += scale * (A + 2 * h * static_cast<double>(l.mlp.shared_expert_ffn_hidden_size) * gamma);
      rep_part += scale * (layernorm + h * E + (m.add_bias_linear ? E : 0) +
                           (l.mlp.shared_expert_gate && l.mlp.shared_expert_ffn_hidden_size > 0 ? h : 0));
      exp_part += scale * 2 * h * static_cast<double>(l.mlp.expert_ffn_hidden_size) * E * gamma;
    } else {
      tp_part += scale * (A + 2 * h * static_cast<double>(l.mlp.ffn_hidden_size) * gamma);
      rep_part += scale * layernorm;
    }
  };
  for (const auto& l : m.layers) add_layer(l, 1.0, tp_block, rep_block, exp_block);
  rep_block += nu * h;  // final norm
  double tp_mtp = 0, rep_mtp = 0, exp_mtp = 0;
  if (m.mtp_num_layers > 0) add_layer(m.layers.back(), static_cast<double>(m.mtp_num_layers), tp_mtp, rep_mtp, exp_mtp);

  // Most loaded shard: 1/p of the decoder, the whole MTP block and one embedding.
  double p_tp = (tp_block / pp + tp_mtp + h * V) / t;
  const double p_rep = rep_block / pp + rep_mtp;
  const double p_exp = (exp_block / pp + exp_mtp) / static_cast<double>(effective_etp(p) * p.ep);
  if (!m.tie_embeddings && p.pp == 1) p_tp += h * V / t;
  auto bpp = [&](double shards) { return s.optimizer.distributed ? 6.0 + 12.0 / shards : 18.0; };
  const double weights =
      (p_tp + p_rep) * bpp(static_cast<double>(p.dp)) + p_exp * bpp(static_cast<double>(p.expert_dp));

  // Activations of the first stage.
  const double sq = static_cast<double>(s.seq_length), b = static_cast<double>(s.micro_batch_size);
  const double L = static_cast<double>(m.num_layers);
  const bool sp_selective = sequence_parallel_on(p) && s.recompute.granularity == RecomputeGranularity::kSelective;
  double act = sp_selective ? sq * b * h * (18 + 4 * ffn / h) * L : sq * b * h * (10 + 24 / t) * L;
  act += 8 * sq * b * pp + sq * b * h * pp;
  if (p.vpp > 1) {
    act *= 1 + (pp - 1) / (pp * static_cast<double>(p.vpp));
  } else if (p.pp > 1 && s.num_micro_batches > 0) {
    act *= std::min(1.0, static_cast<double>(s.num_micro_batches) / pp);
  }
  if (sp_selective) {
    if (p.pp == 1) act += 4 * sq * b * h * (1 + V / h);
    act /= t;
  } else {
    if (p.pp == 1) act += 2 * (sq * b * V / t + sq * b * h);
    act *= 1.05;
  }
  return static_cast<std::int64_t>(std::llround(weights + act));
}

std::int64_t seed_tool_peak(const ModelSpec& m, const TrainingSetup& s) {
  const auto& par = s.parallel;
  const double b = static_cast<double>(s.micro_batch_size), sq = static_cast<double>(s.seq_length);
  const double h = static_cast<double>(m.hidden_size), t = static_cast<double>(par.tp);
  const double c = static_cast<double>(par.cp), V = static_cast<double>(m.vocab_size);
  const double et = par.etp > 0 ? static_cast<double>(par.etp) : 1.0;  // the seed's ETP default is 1
  const double et_eff = (par.tp > 1 || par.ep > 1) ? et : 1.0;
  const auto& rc = s.recompute;
  const bool selective = rc.granularity == RecomputeGranularity::kSelective;
  const double s_moe = std::floor(sq / t) * et;

  // Layers on stage 0 (the seed reports stage 0 only).
  std::int64_t first = m.num_layers / par.pp;
  if (s.pipeline.first_stage_layers)
    first = *s.pipeline.first_stage_layers;
  else if (s.pipeline.last_stage_layers && par.pp > 1)
    first = (m.num_layers - *s.pipeline.last_stage_layers) / (par.pp - 1);
  first = std::min<std::int64_t>(first, m.num_layers);

  double params = V / t * h, expert_params = 0, act_layers = 0, act_first_layer = 0;
  for (std::int64_t i = 0; i < first; ++i) {
    const auto& l = m.layers[static_cast<std::size_t>(i)];
    const auto& a = l.attention;
    const double nh = static_cast<double>(a.num_heads);
    double act = 0;
    if (a.kv_lora_rank > 0) {  // multi-latent attention (see above)
      const double dq = static_cast<double>(a.qk_head_dim + a.qk_pos_emb_head_dim);
      const double qr = a.q_lora_rank ? static_cast<double>(*a.q_lora_rank) : 0.0;
      const double kvr = static_cast<double>(a.kv_lora_rank), dv = static_cast<double>(a.v_head_dim);
      params += h + (qr > 0 ? h * qr + qr * nh * dq / t : h * nh * dq / t) +
                h * (kvr + static_cast<double>(a.qk_pos_emb_head_dim)) +
                kvr * nh * static_cast<double>(a.qk_head_dim + a.v_head_dim) / t + h * nh * dv / t;
      act += b * sq * qr + b * sq * nh * dq / t + b * sq * (kvr + static_cast<double>(a.qk_pos_emb_head_dim)) +
             b * sq * nh * static_cast<double>(a.qk_head_dim + a.v_head_dim) / t + b * sq * nh * dv / t;
      if (!selective) act += 2 * b * sq * (nh / t) * dq * (c > 1 ? 2 : 1);
      if (!rc.has(kRecomputeLayernorm)) act += b * sq * h;  // separate input norm
    } else {
      const double d = static_cast<double>(a.kv_channels), ng = static_cast<double>(a.num_query_groups);
      params += (nh + 2 * ng) * d / t * h + (a.qkv_bias ? (nh + 2 * ng) * d / t : 0) + h * nh * d / t +
                (a.qk_norm ? 2 * d : 0);
      act += 4 * b * sq * nh * d / t;
      if (!selective) act += 2 * b * sq * (ng / t) * d * (c > 1 ? 2 : 1);
    }
    const auto& f = l.mlp;
    if (f.num_experts > 0) {
      const double E = static_cast<double>(f.num_experts), k = static_cast<double>(f.top_k);
      const double Fm = static_cast<double>(f.expert_ffn_hidden_size);
      const double Fs = static_cast<double>(f.shared_expert_ffn_hidden_size);
      const double experts = E / static_cast<double>(par.ep) * 3 * h * Fm / et_eff;
      params += experts + 3 * h * Fs / t + h;
      expert_params += experts;
      if (!rc.has(kRecomputeMoe)) {
        act += 2 * b * s_moe * h + k * b * s_moe * h + 3 * b * s_moe * Fs / t;
        if (!rc.has(kRecomputeMoeAct)) act += 3 * b * s_moe * k * Fm / et_eff;
      }
      if (!rc.has(kRecomputeLayernorm)) act += b * sq * h;  // separate pre-MLP norm
    } else {
      const double F = static_cast<double>(f.ffn_hidden_size);
      params += 3 * h * F / t;  // mbridge forces SwiGLU
      if (!rc.has(kRecomputeMlp)) act += (m.gated_linear_unit ? 3.0 : 1.5) * b * sq * F / t;
    }
    act += 2 * b * sq * h;  // two bias-dropout-adds
    act_layers += act;
    if (i == 0) act_first_layer = act;
  }
  const bool last_too = par.pp == 1;
  const double a_pre = b * sq * h;
  const double a_post = last_too ? 3 * b * sq * V / t : 0;
  if (last_too) params += V / t * h + h;
  const double inflight = static_cast<double>(par.pp);  // m = p - 0
  const double chunk = a_pre + act_layers + (last_too ? b * sq * h : 0) + a_post;
  double act = (chunk - a_post) * inflight + a_post;
  if (rc.granularity == RecomputeGranularity::kFull) {
    const double common = a_pre + b * sq * h * static_cast<double>(first) * inflight;
    if (rc.method == RecomputeMethod::kUniform || rc.num_layers >= first) {
      act = std::max(common + a_post, common + act_first_layer);
    } else {
      const double n = static_cast<double>(first - rc.num_layers);
      act = common + a_post + act_first_layer * n * inflight;
    }
  }
  act = act / c * 2;
  const double dense_rate = s.optimizer.distributed ? 6 + 12 / (static_cast<double>(par.dp) * c) : 18;
  const double expert_rate =
      s.optimizer.distributed
          ? 6 + 12 / (static_cast<double>(par.world_size) / (static_cast<double>(par.pp * par.ep) * et))
          : 18;
  const double weights =
      par.ep * et > 1 ? (params - expert_params) * dense_rate + expert_params * expert_rate : params * dense_rate;
  return static_cast<std::int64_t>(std::llround(weights + act));
}

}  // namespace mme
