f() { A+=("$@"); }
for x in 1 2 3; do f --x$x; done
i=0; while (( i < 3 )); do i=$((i+1)); done
set -- --num-layers $i
eval "python pretrain_gpt.py $* --hidden-size ${#A[@]}0 --num-attention-heads 2"
