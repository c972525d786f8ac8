// sample_helpers.cuh — a header next to sample.cu, included with quotes: the rewriter must make
// the include absolute, because the rewritten file is compiled from the build tree.
#pragma once

__device__ inline int twice(int x) { return 2 * x; }
