/* math_constants.h (cudasim) — the toolkit's CUDART_* constants that kernels use. */
#ifndef CUDASIM_MATH_CONSTANTS_H
#define CUDASIM_MATH_CONSTANTS_H

#define CUDART_INF_F __builtin_inff()
#define CUDART_NAN_F __builtin_nanf("")
#define CUDART_MAX_NORMAL_F 3.40282347e+38f
#define CUDART_MIN_DENORM_F 1.40129846e-45f
#define CUDART_PI_F 3.141592654f
#define CUDART_L2E_F 1.442695041f
#define CUDART_LN2_F 0.693147181f
#define CUDART_INF __builtin_inf()
#define CUDART_NAN __builtin_nan("")
#define CUDART_PI 3.1415926535897931e+0

#endif /* CUDASIM_MATH_CONSTANTS_H */
