# Batch symbol lookup (kernel series): kprobe.multi attach by name must resolve every
# request exactly as the linear kallsyms scan does (batchsym checks the kernel against a
# userspace model of that scan) and fail with the same errno for missing, untraceable and
# repeated names. The same program and expectations run on our kernel (per-name lookups for
# small batches) and on the stock kernels (the linear scan itself).
# Module names: on ours the test module batchsym_kmod adds a module-only name, a name whose
# vmlinux copy is untraceable, one whose vmlinux copy wins and a duplicate inside the module;
# the stock kernels have 9p and its dependencies loaded.
if on ours; then
	batchsym_with_kmod() {
		local rc
		insmod "$bin/batchsym_kmod.ko" || {
			echo "cannot load $bin/batchsym_kmod.ko (built by tests/guest/Makefile)"
			return 1
		}
		"$bin/batchsym" --require dup --require dup-skip --require module \
			--require module-shadow --require module-and-vmlinux
		rc=$?
		rmmod batchsym_kmod || rc=1
		return $rc
	}
	run batchsym batchsym_with_kmod
fi
on stock-7.3 stock-6.12 && run batchsym "$bin/batchsym" --require dup --require dup-skip --require module
