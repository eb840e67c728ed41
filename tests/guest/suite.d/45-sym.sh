# bpfmux sym --kernel --vmlinux: file:line and inlined calls of kernel addresses from the
# running kernel's vmlinux, as addr2line reads them. Our kernel only: vm/run shows the guest
# its vmlinux (the stock kernels' debug packages are not fetched).
on ours && run sym-kernel-lines "$here/sym/kernel-lines.py" "$bpfmux" /run/bpfmux-kernel/vmlinux \
	"$bin/trigger"
