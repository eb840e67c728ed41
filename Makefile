# bpfmux: the kernel series, the guest harness and the toolkit. 'make help' lists targets.
# Build trees, downloads and ccache live in $(BPFMUX_CACHE), outside the checkout.
export BPFMUX_CACHE ?= $(HOME)/.cache/bpfmux

help:
	@echo "make demo          build the kernel and bpfmux, boot it, bpfmux trace on hundreds of functions"
	@echo "make cli           build the bpfmux CLI (target/debug/bpfmux; cargo build)"
	@echo "make test          every test: host (Rust lints + tests) and guest (3 kernels)"
	@echo "make kernel        base + kernel/patches -> bzImage (incremental, in \$$BPFMUX_CACHE)"
	@echo "make kernel-export cache tree commits -> kernel/patches/"
	@echo "make kernel-deb    Debian packages of the kernel (build/kernel-deb/), booted once in the guest"
	@echo "make test-kasan    the series' guest checks on a KASAN build (make kernel-kasan)"
	@echo "make kernel-debug  the series with KASAN and lockdep (for the long UAPI fuzzer run)"
	@echo "make images        fetch the stock Debian 7.3.4 and 6.12 kernels for comparison"
	@echo "make deps          install the Debian packages the build and the guest need"
	@echo "make bench         every benchmark -> bench/results/REPORT.md (see bench/README.md)"
	@echo "make bench-quick   the same harness with short runs, into build/bench-quick/"

deps:
	scripts/install-deps

kernel: deps
	kernel/build.sh

# The same series with KASAN, in its own output directory (kernel/config/kasan.config).
kernel-kasan: deps
	BPFMUX_KCONFIG_EXTRA=kasan BPFMUX_KERNEL_OUT=$(BPFMUX_CACHE)/build-kasan kernel/build.sh

# The same series with lockdep and RCU checking (kernel/config/lockdep.config).
kernel-lockdep: deps
	BPFMUX_KCONFIG_EXTRA=lockdep BPFMUX_KERNEL_OUT=$(BPFMUX_CACHE)/build-lockdep kernel/build.sh

# Both (make kernel-debug): the long fuzzer run of kernel/README.md runs on it.
kernel-debug: deps
	BPFMUX_KCONFIG_EXTRA=kasan+lockdep BPFMUX_KERNEL_OUT=$(BPFMUX_CACHE)/build-debug kernel/build.sh

test-kasan: kernel kernel-kasan
	tests/guest/kasan.sh

kernel-export:
	kernel/export.sh

# Debian packages of the patched kernel for real machines; the packaged image is booted in
# the guest and must pass the smoke part of the suite. Single-threaded TCG (2 vCPUs still):
# with one host thread per vCPU, boot-time text patching sometimes dies of an unclaimed
# int3 under QEMU, stock kernels included (kernel/README.md, "Known issues").
kernel-deb: kernel guest-programs cli
	kernel/deb.sh
	vm/run --kernel "$$(ls build/kernel-deb/boot/vmlinuz-*)" --single-thread --timeout 900 -- \
		tests/guest/suite.sh ours 10

images: deps
	vm/fetch-images.sh

guest-programs: kernel
	$(MAKE) -s -C tests/guest

# The CLI: the debug build the guest tests run too (its library is optimized, see Cargo.toml).
BPFMUX_CLI := target/debug/bpfmux
cli:
	cargo build --bin bpfmux

# bpfmux trace in our kernel's guest: a live table, then latencies (tests/guest/demo/demo.sh).
demo: kernel cli
	vm/run -- tests/guest/demo/demo.sh $(BPFMUX_CLI)

test: kernel images
	tests/run-all

# QUICK=1: short samples, few functions (bench/run.sh --quick).
bench: kernel images
	bench/run.sh $(if $(QUICK),--quick)

bench-quick:
	$(MAKE) bench QUICK=1

.PHONY: help deps kernel kernel-deb kernel-kasan kernel-lockdep kernel-debug test-kasan kernel-export images guest-programs cli demo test bench bench-quick
