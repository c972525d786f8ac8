#!/bin/sh
# ptxas_log.sh <compile command...> — the CUDA compiler launcher of the kernels whose registers and
# spills are tabled (attn_tabled_architectures, cmake/attn.cmake), which compile with -Xptxas=-v:
# runs the compile and keeps ptxas's report, every kernel of every architecture, in <object>.ptxas
# beside the object, where benchmarks/resource_usage.py reads it (spill_info) instead of running
# ptxas again on the PTX in the binary. The report's lines stay out of the build's output; any other
# message of the compile is shown as usual.
out=
prev=
for a in "$@"; do
    [ "$prev" = "-o" ] && out=$a
    prev=$a
done
[ -n "$out" ] || exec "$@"
"$@" 2>"$out.ptxas.tmp"
rc=$?
grep -v -E '^ptxas info|^ +[0-9]+ bytes stack frame' "$out.ptxas.tmp" >&2
if [ $rc -eq 0 ]; then
    mv "$out.ptxas.tmp" "$out.ptxas" && touch "$out.ptxas" # newer than the object: not stale
else
    rm -f "$out.ptxas.tmp" "$out.ptxas"
fi
exit $rc
