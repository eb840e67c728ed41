# The instruction counter itself (vm/insn/plugin.c, lib/insn.h): loops of known length
# count exactly, also across QEMU 7.2's page-crossing quirk, a profile window's
# addresses add up to its count, and the TCG dispatch counts (lookups, jump-cache misses,
# unchained entries) of loops built to have a known number of each are that number. Needs `vm/run --insn` (tests/guest/run.sh boots this part
# so); without the plugin it fails, saying so.
run insn-exact-loops "$bin/insn-check"
