/* device_launch_parameters.h (cudasim) — the built-in variables; some sources include it by name.
 */
#ifndef CUDASIM_DEVICE_LAUNCH_PARAMETERS_H
#define CUDASIM_DEVICE_LAUNCH_PARAMETERS_H
#include <cuda_runtime.h>
#endif
