#!/bin/bash
GPUS_PER_NODE=8
NUM_NODES=${NUM_NODES:-1}
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))
CHECKPOINT_PATH=${1:-"checkpoints/x"}
DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE   # per node
    --nnodes $NUM_NODES
)
MODEL_ARGS=(
    --num-layers 4 --hidden-size 256 --num-attention-heads 8
    --seq-length 512 --max-position-embeddings 512 --swiglu
)
TRAINING_ARGS=(--micro-batch-size 1 --global-batch-size 16 --tokenizer-type NullTokenizer --vocab-size 1000)
if [[ "${DTYPE:-bf16}" == "bf16" ]]; then TRAINING_ARGS+=(--bf16); else TRAINING_ARGS+=("--fp8-format hybrid"); fi
case "$WORLD_SIZE" in 8) TP=2 ;; *) TP=1 ;; esac
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py "${MODEL_ARGS[@]}" ${TRAINING_ARGS[@]} \
    --tensor-model-parallel-size $TP --save $CHECKPOINT_PATH
