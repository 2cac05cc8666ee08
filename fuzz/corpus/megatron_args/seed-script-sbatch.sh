ARGS=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --moe-layer-freq [0]*1+[1]*1 --num-experts 4)
CMD="cd /w; python /opt/pretrain_gpt.py ${ARGS[@]}"
sbatch <<EOF
#!/bin/bash
srun --mpi=pmix -l bash -x -c "${CMD}" 2>&1 | tee \${SLURM_JOB_ID}.log
EOF
