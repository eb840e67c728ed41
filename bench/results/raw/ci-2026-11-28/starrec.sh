#!/bin/sh
cd /work/main
tests/guest/trace/check.py /work/main/target/debug/bpfmux /work/main/build/guest/trigger star global record; echo "rc=$?"
