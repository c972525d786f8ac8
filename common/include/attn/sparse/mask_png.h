/* attn/sparse/mask_png.h — a mask as an image: a black-and-white PNG any viewer opens (1 bit per
 * pixel: an L = 4096 mask is 2 MiB), with no library beyond the C library (the image data is
 * stored in uncompressed deflate blocks; PNG and zlib formats: RFC 2083, RFC 1950/1951). */
#ifndef ATTN_SPARSE_MASK_PNG_H
#define ATTN_SPARSE_MASK_PNG_H

/* Pixel (x, y) of a width x height image is black where black(ctx, y, x) is nonzero: row y is
 * query y, column x key x, as the mask is drawn. Writes path; 0, or -1 with errno set (a file that
 * could not be written is removed). */
int attn_mask_png_write(const char *path, int width, int height,
                        int (*black)(const void *ctx, int y, int x), const void *ctx);

#endif
