#!/bin/sh
N=24 MODES=stacks bench/results/raw/map-reads-2026-11-28/km.sh
