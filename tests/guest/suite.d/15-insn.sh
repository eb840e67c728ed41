# The instruction counter itself (vm/insn/plugin.c, lib/insn.h): loops of known length
# count exactly, also across QEMU 7.2's page-crossing quirk, a profile window's
# addresses add up to its count, and the TCG dispatch counts (lookups, jump-cache misses,
# unchained entries) of loops built to have a known number of each are that number.
# Then its hazards on snippets with known answers: indirect branches of every encoding
# and retpoline thunks, balanced, skipped and push+ret returns against the 16-entry
# return stack model, sites cycling over 1, 2 and 4 targets, data and code lines, the
# overflow of the line set. Needs `vm/run --insn-hazards` (tests/guest/run.sh boots this
# part so: the exact counts hold with the hazard callbacks too); without the plugin, or
# without hazards=on, it fails, saying so.
run insn-exact-loops "$bin/insn-check"
run insn-hazards "$bin/insn-check" --hazards
