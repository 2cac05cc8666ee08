"""From Megatron-LM's parsed arguments: a hand-built argparse.Namespace with the attribute names
megatron.training.get_args() has (no Megatron-LM install), against the CLI given the same run
as a launch line written out by hand."""

from __future__ import annotations

import argparse
import enum
import warnings

import pytest

import mme
from conftest import run_cli


class AttnBackend(enum.Enum):  # as megatron/core/transformer/enums.py defines it
    flash = 1
    fused = 2
    unfused = 3
    local = 4
    auto = 5


def llama_namespace(**overrides) -> argparse.Namespace:
    """A Llama-3-8B-like run on 64 GPUs as get_args() returns it: the flags given, Megatron-LM's
    defaults for the others, derived values, and attributes mme has no use for."""
    values = dict(
        # the model
        num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, group_query_attention=True,
        num_query_groups=8, kv_channels=128, swiglu=True, normalization="RMSNorm", position_embedding_type="rope",
        untie_embeddings_and_output_weights=True, add_bias_linear=False, add_qkv_bias=False,
        max_position_embeddings=8192, vocab_size=128256, padded_vocab_size=None, make_vocab_size_divisible_by=128,
        tokenizer_type="NullTokenizer", qk_layernorm=False, num_experts=None, multi_latent_attention=False,
        # the layout and the training step
        tensor_model_parallel_size=4, pipeline_model_parallel_size=2, context_parallel_size=1,
        expert_model_parallel_size=1, expert_tensor_parallel_size=None, virtual_pipeline_model_parallel_size=None,
        num_layers_per_virtual_pipeline_stage=None, sequence_parallel=True, world_size=64, data_parallel_size=8,
        seq_length=4096, micro_batch_size=1, global_batch_size=256, bf16=True, fp16=False, fp8=None,
        use_distributed_optimizer=True, recompute_granularity="selective", recompute_method=None,
        recompute_num_layers=None, recompute_modules=["core_attn"], attention_backend=AttnBackend.auto,
        transformer_impl="transformer_engine", masked_softmax_fusion=True, gradient_accumulation_fusion=True,
        apply_rope_fusion=True, overlap_grad_reduce=True, moe_layer_freq=1,
        # what mme does not read
        rank=0, local_rank=0, lr=3e-4, min_lr=3e-5, train_iters=1000, data_path=["/data/x"], seed=1234,
        params_dtype=object(), save=None, load=None, log_interval=10, tensorboard_dir=None,
    )
    values.update(overrides)
    return argparse.Namespace(**values)


LLAMA_LINE = ("torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
              "--group-query-attention --num-query-groups 8 --kv-channels 128 --swiglu --normalization RMSNorm "
              "--position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear "
              "--max-position-embeddings 8192 --vocab-size 128256 --make-vocab-size-divisible-by 128 "
              "--tokenizer-type NullTokenizer --moe-layer-freq 1 "
              "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --context-parallel-size 1 "
              "--expert-model-parallel-size 1 --sequence-parallel --seq-length 4096 "
              "--micro-batch-size 1 --global-batch-size 256 --bf16 --use-distributed-optimizer "
              "--recompute-granularity selective --recompute-modules core_attn --attention-backend auto "
              "--transformer-impl transformer_engine --overlap-grad-reduce")


def test_namespace_is_the_cli_launch_line():
    r = mme.from_megatron_args(llama_namespace())
    expected = run_cli("estimate", "--megatron-args", LLAMA_LINE, "--json").json()
    assert r.to_dict() == expected
    assert r.setup.tp == 4 and r.setup.pp == 2 and r.setup.num_gpus == 64
    # --overlap-grad-reduce reached the estimate: the setup carries it.
    assert r.to_dict()["setup"]["overlap_grad_reduce"] is True


def test_interleaved_namespace_carries_both_vpp_attributes():
    # Megatron-LM derives virtual_pipeline_model_parallel_size from
    # --num-layers-per-virtual-pipeline-stage; get_args() holds both.
    ns = llama_namespace(num_layers_per_virtual_pipeline_stage=4, virtual_pipeline_model_parallel_size=4)
    r = mme.from_megatron_args(ns)
    assert r.to_dict() == run_cli("estimate", "--megatron-args", LLAMA_LINE + " --num-layers-per-virtual-pipeline-stage 4",
                                  "--json").json()
    assert r.setup.vpp == 4


def test_flags_of_a_namespace():
    flags = mme.megatron_flags(llama_namespace(padded_vocab_size=128512))
    assert "--lr" not in flags and "--rank" not in flags and "--data-path" not in flags and "--seed" not in flags
    assert "--params-dtype" not in flags and "--fp16" not in flags and "--qk-layernorm" not in flags
    assert flags[flags.index("--attention-backend") + 1] == "auto"
    # NullTokenizer's 128256 + 1 padded to 128 x TP 4 by Megatron-LM's tokenizer: the model's rows.
    assert flags[flags.index("--padded-vocab-size") + 1] == "128512"
    assert flags[flags.index("--vocab-size") + 1] == "128256"
    # ... the same run as the launch line's: the same bytes, the rows given rather than padded.
    r = mme.from_megatron_args(llama_namespace(padded_vocab_size=128512))
    line = run_cli("estimate", "--megatron-args", LLAMA_LINE + " --padded-vocab-size 128512", "--json").json()
    assert r.to_dict() == line
    assert r.to_dict()["peak"] == run_cli("estimate", "--megatron-args", LLAMA_LINE, "--json").json()["peak"]
    assert "--disable-bias-linear" in flags and "--no-masked-softmax-fusion" not in flags
    off = mme.megatron_flags(llama_namespace(masked_softmax_fusion=False, gradient_accumulation_fusion=False,
                                             apply_rope_fusion=False))
    assert "--no-masked-softmax-fusion" in off and "--no-gradient-accumulation-fusion" in off
    assert "--no-rope-fusion" in off
    # A mapping of the same names works too, and every flag is one mme reads.
    assert mme.megatron_flags(vars(llama_namespace(padded_vocab_size=128512))) == flags
    known = mme.known_megatron_flags()
    assert all(f[2:] in known for f in flags if f.startswith("--"))


class TorchDtype:  # a torch.dtype as validate_args() leaves the dtype flags: str() is "torch.bfloat16"
    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return "torch." + self.name


# Attributes a plain GPT run's get_args() holds for features it does not use: Megatron-LM's
# defaults (arguments.py, TransformerConfig), and the values validate_args() derives.
GPT_DEFAULTS = dict(
    softmax_type="vanilla", mlp_chunks_for_training=1, glu_linear_offset=0.0, patch_dim=16, img_h=224, img_w=224,
    num_channels=3, mamba_num_groups=8, mamba_head_dim=64, mamba_state_dim=128, moe_dispatch_fwd_dtype="bf16",
    tp_comm_bootstrap_backend="nccl", muon_tp_mode="duplicated", inference_max_seq_length=2560,
    encoder_num_layers=32, encoder_seq_length=4096, mamba_inference_ssm_states_dtype=TorchDtype("bfloat16"),
    main_grads_dtype=TorchDtype("float32"), moe_input_jitter_eps=None, retriever_report_topk_accuracies=[])


def not_modelled(result) -> list[str]:
    return [a for a in result.to_dict()["assumptions"] if " is not modelled" in a]


def test_a_gpt_namespace_names_no_feature_it_does_not_use():
    ns = llama_namespace(**GPT_DEFAULTS)
    flags = mme.megatron_flags(ns)
    # Derived lengths are left out; torch dtypes become Megatron-LM's spellings.
    assert "--encoder-seq-length" not in flags and "--encoder-num-layers" not in flags
    assert flags[flags.index("--main-grads-dtype") + 1] == "fp32"
    assert flags[flags.index("--mamba-inference-ssm-states-dtype") + 1] == "bf16"
    assert flags[flags.index("--glu-linear-offset") + 1] == "0.0"
    r = mme.from_megatron_args(ns)
    assert not_modelled(r) == []
    assert r.to_dict()["warnings"] == []
    assert r.to_dict()["peak"] == mme.from_megatron_args(llama_namespace()).to_dict()["peak"]
    # The same attributes away from their defaults: each named.
    changed = dict(mlp_chunks_for_training=2, patch_dim=14,
                   mamba_inference_ssm_states_dtype=TorchDtype("float32"))
    lines = not_modelled(mme.from_megatron_args(llama_namespace(**{**GPT_DEFAULTS, **changed})))
    assert sorted(line.split(" ")[0] for line in lines) == sorted("--" + k.replace("_", "-") for k in changed)
    # A Mamba size away from its default means nothing without a hybrid pattern: said, not modelled.
    r = mme.from_megatron_args(llama_namespace(**{**GPT_DEFAULTS, "mamba_head_dim": 32}))
    assert not_modelled(r) == []
    assert any("--mamba-head-dim is ignored" in w for w in r.to_dict()["warnings"])


def test_moe_mla_namespace_and_renamed_attributes():
    # A DeepSeek-V3-like MoE + MLA run; Megatron-LM parses --moe-layer-freq into a list and keeps
    # --fp8-format under args.fp8.
    ns = llama_namespace(
        num_layers=8, hidden_size=2048, ffn_hidden_size=8192, num_attention_heads=16, group_query_attention=False,
        num_query_groups=16, kv_channels=128, multi_latent_attention=True, q_lora_rank=512, kv_lora_rank=256,
        qk_head_dim=64, qk_pos_emb_head_dim=32, v_head_dim=64, num_experts=16, moe_router_topk=2,
        moe_ffn_hidden_size=1024, moe_shared_expert_intermediate_size=1024, moe_layer_freq=[0, 1, 1, 1, 1, 1, 1, 1],
        expert_model_parallel_size=4, tensor_model_parallel_size=2, world_size=32, fp8="hybrid",
        recompute_modules=None, recompute_granularity=None)
    line = ("torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --num-layers 8 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 16 --num-query-groups 16 "
            "--kv-channels 128 --swiglu --normalization RMSNorm --position-embedding-type rope "
            "--untie-embeddings-and-output-weights --disable-bias-linear --max-position-embeddings 8192 "
            "--vocab-size 128256 --make-vocab-size-divisible-by 128 --tokenizer-type NullTokenizer "
            "--multi-latent-attention --q-lora-rank 512 --kv-lora-rank 256 --qk-head-dim 64 --qk-pos-emb-head-dim 32 "
            "--v-head-dim 64 --num-experts 16 --moe-router-topk 2 --moe-ffn-hidden-size 1024 "
            "--moe-shared-expert-intermediate-size 1024 --moe-layer-freq [0,1,1,1,1,1,1,1] "
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --context-parallel-size 1 "
            "--expert-model-parallel-size 4 --sequence-parallel --seq-length 4096 "
            "--micro-batch-size 1 --global-batch-size 256 --bf16 --fp8-format hybrid --use-distributed-optimizer "
            "--attention-backend auto --transformer-impl transformer_engine --overlap-grad-reduce")
    r = mme.from_megatron_args(ns)
    assert r.to_dict() == run_cli("estimate", "--megatron-args", line, "--json").json()
    assert r.setup.precision == "fp8" and r.setup.ep == 4


def test_options_override_the_run():
    r = mme.from_megatron_args(llama_namespace(), gpu="H100", recompute_granularity="full")
    expected = run_cli("estimate", "--megatron-args", LLAMA_LINE, "--gpu", "H100", "--recompute-granularity", "full",
                       "--json").json()
    assert r.to_dict() == expected
    with pytest.raises(mme.UsageError, match="described by args"):
        mme.from_megatron_args(llama_namespace(), megatron_args="--num-layers 2")


def test_preflight_passes_when_it_fits():
    r = mme.preflight(llama_namespace(), gpu="H100")
    assert r.fits("H100") is True
    assert r.to_dict() == run_cli("estimate", "--megatron-args", LLAMA_LINE, "--gpu", "H100", "--json").json()


def test_preflight_raises_when_it_does_not_fit():
    big = llama_namespace(tensor_model_parallel_size=1, pipeline_model_parallel_size=1, sequence_parallel=False,
                          use_distributed_optimizer=False, recompute_granularity=None, recompute_modules=None,
                          micro_batch_size=8, world_size=8, global_batch_size=64)
    with pytest.raises(mme.OutOfMemoryError, match="does not fit A100-SXM-40GB") as e:
        mme.preflight(big, gpu="A100-40GB")
    err = e.value
    assert isinstance(err, mme.Error) and err.exit_code == 1
    verdict = err.result.fit("A100-40GB")
    assert verdict.fits is False and verdict.headroom_bytes < 0
    assert f"{-verdict.headroom_bytes / 2**30:.2f} GiB short" in err.message
    # raise_if_oom=False: a warning and the result.
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = mme.preflight(big, gpu="A100-40GB", raise_if_oom=False)
    assert r.fits("A100-40GB") is False
    assert any(issubclass(x.category, mme.MmeWarning) and "does not fit" in str(x.message) for x in w)
    with pytest.raises(mme.UsageError, match="gpu= is required"):
        mme.preflight(big)
