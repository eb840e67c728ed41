#!/bin/bash
cd /work/main
for round in 1 2; do
for img in exit3 final2; do
  vm/run --kernel /tmp/work/img/bzImage.$img --single-thread --smp 2 --timeout 1200 -- \
    build/bench/attach --counts 1,1000,10000,0 --json /work/main/build/ab/attach4-$img-$round.json global tracing_multi kprobe.multi \
    > /tmp/work/res/attach4-$img-$round.log 2>&1
  echo "$img $round rc=$?" >> /tmp/work/res/attach-ab4.done
done
done
vm/run --kernel /tmp/work/img/bzImage.final2 --single-thread --smp 2 --timeout 1200 -- \
    build/bench/attach --runs --counts 0 --json /work/main/build/ab/attach4-runs-final2.json global kprobe.multi > /tmp/work/res/attach4-runs-final2.log 2>&1
echo "runs rc=$?" >> /tmp/work/res/attach-ab4.done
