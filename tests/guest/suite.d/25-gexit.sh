# fexit.multi, fmod_ret.multi and fsession.multi on the global trampoline (kernel series):
# only our kernel has BPF_MODIFY_RETURN_MULTI and the global backend's origin call.
if on ours; then
	run gexit-fexit "$bin/gexit" fexit 500
	run gexit-fmodret "$bin/gexit" fmodret 200
	run gexit-mmap "$bin/gexit" mmap
	run gexit-sleep "$bin/gexit" sleep
	run gexit-rollback "$bin/gexit" rollback
	run gexit-coexist "$bin/gexit" coexist 300
	run gexit-skipchain "$bin/gexit" skipchain 50
	run gexit-session "$bin/gexit" session 200
	run gexit-kinds "$bin/gexit" kinds 200
	run gexit-args7 "$bin/gexit" args7
	run gexit-pinned "$bin/gexit" pinned 100
	run gexit-pinned-detach "$bin/gexit" pinned-detach
	run gexit-drain-backoff "$bin/gexit" drain-backoff
fi
