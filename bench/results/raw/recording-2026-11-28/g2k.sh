#!/bin/sh
ENGINES=kprobe-multi /work/wt-record/build/g2.sh
ENGINES=kprobe-multi /work/wt-record/build/g2.sh
