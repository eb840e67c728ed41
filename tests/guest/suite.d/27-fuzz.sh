# The series' UAPI fuzzed (tests/guest/fuzz/uapi-fuzz.c): tracing multi-links
# of every kind on both backends, the XDP chain commands, and gtramp_kmod.ko (an
# IPMODIFY ftrace user) coming and going, from three threads on shared fds. Every
# refusal must be a documented errno, link info and enumeration must match, nothing may
# be left behind. A few thousand operations at a fixed seed here; tests/guest/kasan.sh
# runs more on the KASAN build (UAPI_FUZZ_OPS, UAPI_FUZZ_SEEDS).
# ipmodify-race is the crash it found first (the module leaving while a global exit-kind link
# attaches next to a per-function one), as a loop.
if on ours; then
	run uapi-fuzz "$bin/uapi-fuzz" 8000 1
	run ipmodify-race "$bin/ipmodify-race" 40 fexit fexit
	run ipmodify-race-fsession "$bin/ipmodify-race" 40 fsession fmod_ret
fi
