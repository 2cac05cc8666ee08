// The knobs of communication overlap and its buffers: the flex dispatcher's backend, the
// shared-expert and expert-parallel overlaps, TP communication overlap (TE userbuffers) and the
// data-parallel buckets. Part of the setup schema's table (setup_schema.hpp), in spec-file order;
// what each one costs is framework/src/engine/communication_buffers.cpp and the moe plugin.
#include "setup_knobs.hpp"

namespace mme::setup_knobs_detail {

namespace {

// transformer_config.py __post_init__: --moe-enable-deepep is the deprecated spelling of
// --moe-flex-dispatcher-backend deepep, with the flex dispatcher only.
void megatron_flex_backend(const MegatronArgs& a, TrainingSetup& s) {
  const SetupKnob& k = *find_knob("moe-flex-dispatcher-backend");
  if (auto v = given(a, "moe-flex-dispatcher-backend"))
    s.comm.flex_backend =
        must<FlexBackend>(kFlexBackendNames, parse_knob_text(k, "--moe-flex-dispatcher-backend", *v, true));
  if (!a.enabled("moe-enable-deepep")) return;
  if (s.dispatcher != TokenDispatcher::kFlex)
    throw UsageError("--moe-enable-deepep: DeepEP backend is only supported with flex token dispatcher (Megatron-LM)");
  if (s.comm.flex_backend == FlexBackend::kHybridEP)
    throw UsageError("--moe-enable-deepep: Only one backend is supported for flex token dispatcher (Megatron-LM)");
  s.comm.flex_backend = FlexBackend::kDeepEP;
}

bool flex(const TrainingSetup& s) { return s.dispatcher == TokenDispatcher::kFlex; }

}  // namespace

void add_communication_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "moe-flex-dispatcher-backend",
       .kind = K::kEnum,
       .flag = "moe-flex-dispatcher-backend",
       .help = "with --moe-token-dispatcher flex: deepep (default) | hybridep",
       .doc_value = "B",
       .doc = "with `--moe-token-dispatcher flex`: `deepep` or `hybridep` (their communication buffers are outside "
              "PyTorch's allocator: listed as an assumption)",
       .doc_default = "deepep",
       .table = kFlexBackendNames,
       .values = {"deepep", "hybridep"},
       .refused = {{"ncclep",
                    "{}: ncclep (NCCL EP through Transformer Engine's ep API) is not modelled; deepep and hybridep "
                    "are"}},
       .megatron = {"moe-flex-dispatcher-backend"},
       .megatron_read = megatron_flex_backend,
       .megatron_extra = {"moe-enable-deepep"},
       .spec_section = "training",
       .spec_name = "moe_flex_dispatcher_backend",
       .spec_default = "deepep",
       .spec_summary = "with moe_token_dispatcher_type flex: the DeepEP or HybridEP library",
       .json_key = "moe_flex_dispatcher_backend",
       .args_when = flex,
       .get = [](const S& s) { return name(kFlexBackendNames, s.comm.flex_backend); },
       .set = [](S& s, const J& v) { s.comm.flex_backend = must<FlexBackend>(kFlexBackendNames, v); }});
  add({.id = "moe-shared-expert-overlap",
       .kind = K::kBool,
       .flag = "moe-shared-expert-overlap",
       .help = "shared experts on a side stream, overlapped with the token dispatch (alltoall or flex)",
       .doc = "shared experts on a side stream, overlapped with the token dispatch (`alltoall` or `flex` "
              "dispatcher): they keep their gathered input, and their backward runs beside the routed experts'",
       .megatron = {"moe-shared-expert-overlap"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "moe_shared_expert_overlap",
       .spec_default = "false",
       .spec_summary = "shared experts overlapped with the token dispatch (alltoall or flex)",
       .json_key = "moe_shared_expert_overlap",
       .get = [](const S& s) { return J(s.comm.shared_expert_overlap); },
       .set = [](S& s, const J& v) { s.comm.shared_expert_overlap = v.get<bool>(); }});
  add({.id = "overlap-moe-expert-parallel-comm",
       .kind = K::kBool,
       .flag = "overlap-moe-expert-parallel-comm",
       .help = "combined 1F1B: one micro-batch's forward runs layer by layer beside another's backward",
       .doc = "combined 1F1B (`combined_1f1b.py`): one micro-batch's forward runs layer by layer beside another's "
              "backward, hiding the expert-parallel all-to-all (needs `--ep` > 1; with `--pp` > 1 also `--vpp`)",
       .megatron = {"overlap-moe-expert-parallel-comm"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "overlap_moe_expert_parallel_comm",
       .spec_default = "false",
       .spec_summary = "combined 1F1B: a forward beside a backward, layer by layer (needs EP > 1)",
       .json_key = "overlap_moe_expert_parallel_comm",
       .get = [](const S& s) { return J(s.comm.ep_overlap); },
       .set = [](S& s, const J& v) { s.comm.ep_overlap = v.get<bool>(); }});
  add({.id = "tp-comm-overlap",
       .kind = K::kBool,
       .flag = "tp-comm-overlap",
       .help = "TP communication overlapped with the GEMMs (TE userbuffers; needs sequence parallelism)",
       .doc = "TP communication overlapped with the GEMMs: Transformer Engine's userbuffers, outside PyTorch's "
              "allocator (needs sequence parallelism)",
       .megatron = {"tp-comm-overlap"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "tp_comm_overlap",
       .spec_default = "false",
       .spec_summary = "TP communication overlapped with the GEMMs (TE userbuffers; needs sequence_parallel)",
       .json_key = "tp_comm_overlap",
       .get = [](const S& s) { return J(s.comm.tp_comm_overlap); },
       .set = [](S& s, const J& v) { s.comm.tp_comm_overlap = v.get<bool>(); }});
  add({.id = "overlap-grad-reduce",
       .kind = K::kBool,
       .flag = "overlap-grad-reduce",
       .help = "gradient reduce-scatter / all-reduce per bucket, overlapped with the backward",
       .doc = "gradient reduce-scatter / all-reduce per bucket during the backward (the buckets are views of the "
              "gradient buffer; their padding is in the upper bound)",
       .megatron = {"overlap-grad-reduce"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "overlap_grad_reduce",
       .spec_default = "false",
       .spec_summary = "gradient communication per bucket during the backward",
       .json_key = "overlap_grad_reduce",
       .get = [](const S& s) { return J(s.comm.overlap_grad_reduce); },
       .set = [](S& s, const J& v) { s.comm.overlap_grad_reduce = v.get<bool>(); }});
  add({.id = "overlap-param-gather",
       .kind = K::kBool,
       .flag = "overlap-param-gather",
       .help = "parameter all-gather per bucket, overlapped with the forward (needs --overlap-grad-reduce)",
       .doc = "parameter all-gather per bucket during the forward, into the parameter buffer (needs the "
              "distributed optimizer and `--overlap-grad-reduce`)",
       .megatron = {"overlap-param-gather"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "overlap_param_gather",
       .spec_default = "false",
       .spec_summary = "parameter all-gather per bucket during the forward (needs overlap_grad_reduce)",
       .json_key = "overlap_param_gather",
       .get = [](const S& s) { return J(s.comm.overlap_param_gather); },
       .set = [](S& s, const J& v) { s.comm.overlap_param_gather = v.get<bool>(); }});
  add({.id = "ddp-bucket-size",
       .kind = K::kInt,
       .flag = "ddp-bucket-size",
       .help = "parameters per data-parallel bucket with --overlap-grad-reduce (default max(4e7, 1e6 x DP))",
       .doc_value = "N",
       .doc = "parameters per data-parallel bucket with `--overlap-grad-reduce`",
       .doc_default = "max(4e7, 1e6 x DP)",
       .max = kMaxWorldSize,
       .megatron = {"ddp-bucket-size"},
       .spec_section = "training",
       .spec_name = "ddp_bucket_size",
       .spec_default = "null",
       .spec_summary = "with overlap_grad_reduce: parameters per data-parallel bucket",
       .json_key = "ddp_bucket_size",
       .get = [](const S& s) { return positive_or_null(s.comm.ddp_bucket_size); },
       .set = [](S& s, const J& v) { s.comm.ddp_bucket_size = v.is_null() ? 0 : as_int(v); }});
  add({.id = "ddp-pad-buckets-for-high-nccl-busbw",
       .kind = K::kBool,
       .flag = "ddp-pad-buckets-for-high-nccl-busbw",
       .help = "pad each bucket to a multiple of lcm(DP, 128, 2^16) elements, not lcm(DP, 128)",
       .doc = "pad each data-parallel bucket to a multiple of lcm(DP, 128, 2^16) elements instead of "
              "lcm(DP, 128) (distributed optimizer; in the upper bound)",
       .megatron = {"ddp-pad-buckets-for-high-nccl-busbw"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "ddp_pad_buckets_for_high_nccl_busbw",
       .spec_default = "false",
       .spec_summary = "pad the data-parallel buckets to lcm(DP, 128, 2^16) elements",
       .json_key = "ddp_pad_buckets_for_high_nccl_busbw",
       .get = [](const S& s) { return J(s.comm.pad_buckets_for_nccl); },
       .set = [](S& s, const J& v) { s.comm.pad_buckets_for_nccl = v.get<bool>(); }});
}

}  // namespace mme::setup_knobs_detail
