#!/usr/bin/python3
"""Runs in the guest: `bpfmux features --json` must match what each kernel is known to have.

usage: features-check.py KERNEL BPFMUX   (KERNEL: ours, stock-7.3, stock-6.12)
"""
import json
import subprocess
import sys

# Known facts about the kernels, not guesses: the smoke tests prove each of them directly.
EVERY_GUEST = {
    "btf": "yes", "fentry": "yes", "fexit": "yes", "fmod_ret": "yes", "freplace": "yes",
    "kprobe.multi": "yes", "kprobe.session": "yes", "uprobe.multi": "yes",
    "xdp.generic": "yes", "procmap_query": "yes",
}
EXPECTED = {
    "ours": {**EVERY_GUEST, "tracing_multi": "yes", "xdp.native": "yes",
             "global_trampoline": "yes", "fmod_ret.multi": "yes",
             "fsession.multi.global": "yes", "xdp.chain_calls": "yes"},
    "stock-7.3": {**EVERY_GUEST, "tracing_multi": "yes", "global_trampoline": "no",
                  "fmod_ret.multi": "no", "fsession.multi.global": "no",
                  "xdp.chain_calls": "no"},
    "stock-6.12": {**EVERY_GUEST, "tracing_multi": "no", "global_trampoline": "no",
                   "fmod_ret.multi": "no", "fsession.multi.global": "no",
                   "xdp.chain_calls": "no"},
}


def main():
    kernel, bpfmux = sys.argv[1], sys.argv[2]
    out = subprocess.run([bpfmux, "features", "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"FAIL - bpfmux features exited {out.returncode}: {out.stderr.strip()}")
        return 1
    got = {f["name"]: f for f in json.loads(out.stdout)["features"]}
    failures = 0
    for name, want in EXPECTED[kernel].items():
        have = got.get(name, {}).get("status", "missing")
        ok = have == want
        failures += not ok
        detail = got.get(name, {}).get("detail", "")
        print(f"{'ok' if ok else 'FAIL'} - {name}: {have} (want {want}) {detail}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
