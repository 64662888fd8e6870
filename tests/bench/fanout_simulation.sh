#!/usr/bin/env bash
# The pool simulation at full size: 4,096 ranks x 512 servers (capacities
# 5..20 batches/s, 4x apart), 120 simulated seconds, servers failing and
# joining, three jobs of different demand, on the real scheduler core.
# Prints, for demand at 0.7x and at 1.5x the pool's capacity: delivered
# against capacity, each rank's share of its demand, server load against its
# capacity-weighted share, streams per server (max against mean), servers
# per rank and the prefetch depth against its cap.
# Usage: tests/bench/fanout_simulation.sh [BUILD_DIR] [RANKS,SERVERS,SECONDS]
set -euo pipefail
build=${1:-build}
size=${2:-4096,512,120}
cmake --build "$build" --target fanout_simulation_test >/dev/null
STOKER_FANOUT_SIM=$size "$build/client/fanout_simulation_test" | grep -E '^(simulating|demand|simulated)'
