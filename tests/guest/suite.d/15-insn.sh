# The instruction counter itself (vm/insn/plugin.c, lib/insn.h): loops of known length
# count exactly, also across QEMU 7.2's page-crossing quirk, and a profile window's
# addresses add up to its count. Needs `vm/run --insn` (tests/guest/run.sh boots this part
# so); without the plugin it fails, saying so.
run insn-exact-loops "$bin/insn-check"
