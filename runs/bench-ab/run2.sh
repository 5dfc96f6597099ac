#!/bin/bash
# seedfleet bench on Pong, before (08c9b80 in /work/wt23) and after (main), order B A A B B A.
set -x
ARGS="--env ALE/Pong-v5 --actors 4 --envs-per-actor 64 --env-threads 1 --seconds 20"
OUT=/work/main/runs/bench-ab
run() { (cd $2 && .venv/bin/seedfleet bench $ARGS --json $OUT/$1.json > $OUT/$1.log 2>&1); }
run before3 /work/wt23
run after3 /work/main
run after4 /work/main
run before4 /work/wt23
run before5 /work/wt23
run after5 /work/main
echo done > $OUT/done2
