// file_scope_shared.cu — extern __shared__ at file scope, which the simulator cannot map: the
// rewriter must turn it into a compile error that names this file and line.
namespace kernels {
extern __shared__ float tile[]; // @file_scope_shared
}

__global__ void use_tile(float *out) { out[threadIdx.x] = kernels::tile[threadIdx.x]; }
