#!/bin/bash
# One closed-loop run: server pinned to core 0, loadgen on core 1; prints CPU-µs per response (user, kernel).
BIN=$1; PORT=$2
taskset -c 0 $BIN --hostname 127.0.0.1 --port $PORT --workers 1 --middleware bare > /dev/null 2>&1 &
SP=$!
sleep 0.4
taskset -c 1 /work/main/target/release/loadgen -c 100 -d 1s http://127.0.0.1:$PORT/api/hello >/dev/null 2>&1
read -r -a S0 < /proc/$SP/stat
R=$(taskset -c 1 /work/main/target/release/loadgen -c 100 -d 3s http://127.0.0.1:$PORT/api/hello 2>&1 | grep -oE "^  [0-9]+ responses" | grep -oE "[0-9]+")
read -r -a S1 < /proc/$SP/stat
kill $SP; wait $SP 2>/dev/null
TCK=$(getconf CLK_TCK)
python3 -c "u=($((${S1[13]}-${S0[13]})))/$TCK*1e6/$R; k=($((${S1[14]}-${S0[14]})))/$TCK*1e6/$R; print(f'{u:.2f} {k:.2f} {$R}')"
