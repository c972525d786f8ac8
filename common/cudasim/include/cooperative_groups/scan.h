/* cooperative_groups/scan.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <cooperative_groups/scan.h>: cooperative_groups::inclusive_scan/exclusive_scan; write the scan with tile.shfl_up. See common/cudasim/README.md."
