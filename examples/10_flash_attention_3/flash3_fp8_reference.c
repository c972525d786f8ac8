/* flash3_fp8_reference.c — the CPU side of version 4 (flash3_fp8.h), written from the
 * definitions and sharing nothing with the kernels of flash3_fp8.cu: the Hadamard step in double
 * precision (the same butterflies, on exact sums of at most D doubles of 16-bit values), the
 * scale rule by doubling and halving, and e4m3's spacing from the format's definition
 * (attn/fp8.h: 3 mantissa bits, bias 7, subnormals below 2^-6 spaced 2^-9).
 */
#include <math.h>
#include <stdint.h>

#include "flash3_fp8.h"

void fa3_fp8_hadamard_ref(const double *x, int64_t rows, int D, double *out) {
    for (int64_t r = 0; r < rows; ++r) {
        double *y = out + r * D;
        const double *xr = x + r * D;
        for (int d = 0; d < D; ++d)
            y[d] = xr[d];
        for (int h = 1; h < D; h *= 2)
            for (int i = 0; i < D; i += 2 * h)
                for (int j = i; j < i + h; ++j) {
                    const double a = y[j], b = y[j + h];
                    y[j] = a + b;
                    y[j + h] = a - b;
                }
        const double norm = sqrt((double)D);
        for (int d = 0; d < D; ++d)
            y[d] /= norm;
    }
}

double fa3_fp8_scale_ref(double amax) {
    if (!(amax > 0.0))
        return 1.0;
    double s = 1.0;
    while (amax > 448.0 * s)
        s *= 2.0;
    while (amax <= 448.0 * (s / 2.0))
        s /= 2.0;
    return s;
}

double fa3_fp8_half_spacing_ref(double y) {
    const double a = fabs(y);
    if (a < ldexp(1.0, -6))
        return ldexp(1.0, -10);
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e): spacing 2^(e - 1 - 3) */
    return ldexp(1.0, e - 1 - 4);
}
