// The model FLOPs of a training step as Megatron-LM counts them (megatron/training/training.py
// num_floating_point_operations): what the planner reports as model TFLOP/s per GPU, in the
// convention of Megatron-Bridge's published tables.
#include <algorithm>

#include "mme/engine/estimator.hpp"
#include "mme/planner/planner.hpp"
#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

// megatron/training/training.py num_floating_point_operations (transformer_flops, BSHD: every
// sequence seq_length long): per token 3 (forward, weight and input gradient) x 2 (FMA) x the
// GEMM weights a token uses, plus the causal core attention, plus the logits of the padded
// vocabulary for the model and each MTP depth. MTP depths count as layers of the last layer's
// kind, with their norms and eh_proj. A hybrid model's layers (hybrid_flops) count their one block
// each, the Mamba layers as mamba_layer_flops.
double megatron_model_flops(const ModelSpec& m, const TrainingSetup& s, double sequences) {
  const double h = static_cast<double>(m.hidden_size), seq = static_cast<double>(s.seq_length);
  const double mtp = static_cast<double>(m.mtp_num_layers);
  // ffn_expansion_factor = 3 if args.swiglu else 2: the formula knows SwiGLU as the one gated
  // unit; GPT-OSS's quick-GEGLU (--quick-geglu) counts as 2, as the published tables do.
  const bool swiglu = m.gated_linear_unit && (m.activation == "silu" || m.activation == "swish");
  const double ffn_factor = swiglu ? 3 : 2;
  // Per token: a layer's attention (its projections and, with `seq`, the causal core; 0 for none)
  // and its MLP (dense, or the experts a token is routed to and the shared ones; 0 for none).
  auto attention_flops = [&](const AttentionSpec& a) {
    if (a.kind == "no_attention") return 0.0;
    if (a.kind == "mamba") {
      // training.py mamba_layer_flops (hybrid models), which takes d_in = 2 x hidden whatever
      // --mamba-num-heads says: in_proj 2 h (2 d_in + 2 groups x state + heads), the scan
      // 7 d_in x state, out_proj 2 d_in h forward, times 3.
      const double d_in = 2 * h, state = static_cast<double>(a.mamba_state_dim);
      return 3 * (2 * h *
                      (2 * d_in + 2 * static_cast<double>(a.mamba_num_groups) * state +
                       static_cast<double>(a.mamba_num_heads)) +
                  7 * d_in * state + 2 * d_in * h);
    }
    const double n = static_cast<double>(a.num_heads);
    double attention = 0, core = 0;
    if (a.kind == "mla") {
      const double dq = static_cast<double>(a.qk_head_dim), dr = static_cast<double>(a.qk_pos_emb_head_dim);
      const double dv = static_cast<double>(a.v_head_dim), kv_r = static_cast<double>(a.kv_lora_rank);
      const double q_term =
          a.q_lora_rank ? static_cast<double>(*a.q_lora_rank) * (h + n * (dq + dr) + 1) : h * n * (dq + dr);
      attention = 6 * (q_term + kv_r * (h + n * (dq + dv) + 1) + h * dr + n * dv * h);
      core = 6 * (n * (dq + dr) / 2 + n * dv / 2);
    } else {
      // (hybrid_flops' attn_layer_flops gives the same: 4 h p (h + h g / n) x 3 and 2 s h p x 3.)
      const double d = static_cast<double>(a.kv_channels > 0 ? a.kv_channels : m.hidden_size / a.num_heads);
      const double groups = static_cast<double>(a.num_query_groups > 0 ? a.num_query_groups : a.num_heads);
      const double q = d * n, kv = d * groups;
      attention = 6 * (h * (q + 2 * kv) + q * h);
      core = 6 * q;  // / 2 (causal) x 2 (QK^T and its product with V)
    }
    return attention + core * seq;
  };
  auto mlp_flops = [&](const MlpSpec& f) {
    // (hybrid_flops' mlp_layer_flops and moe_layer_flops: 4 h F x 3/2 for SwiGLU, x 3.)
    return f.num_experts > 0 ? 6 * h * ffn_factor *
                                   (static_cast<double>(f.expert_ffn_hidden_size) * static_cast<double>(f.top_k) +
                                    static_cast<double>(f.shared_expert_ffn_hidden_size))
                             : 6 * h * ffn_factor * static_cast<double>(f.ffn_hidden_size);
  };
  auto layer_flops = [&](const LayerSpec& l) { return attention_flops(l.attention) + mlp_flops(l.mlp); };
  double per_token = 0;
  for (const LayerSpec& l : m.layers) per_token += layer_flops(l);
  if (m.mtp_num_layers > 0 && !m.layers.empty())
    per_token += mtp * (layer_flops(m.layers.back()) + 6 * (3 * h + 2 * h * h));
  const double vocab = static_cast<double>(
      padded_vocab_size(m.vocab_size, s.make_vocab_size_divisible_by, std::max<std::int64_t>(s.parallel.tp, 1)));
  per_token += 6 * h * vocab * (mtp + 1);
  return per_token * sequences * seq;
}

}  // namespace mme
