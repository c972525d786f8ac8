/* mask_png.c — attn/sparse/mask_png.h: a 1-bit greyscale PNG. Chunks IHDR, IDAT, IEND, each with
 * its CRC-32; IDAT is a zlib stream of stored (uncompressed) deflate blocks of at most 65535 bytes,
 * closed by the Adler-32 of the raw data: every scanline is a filter byte (0, none) and its pixels,
 * 8 per byte, most significant bit first, 1 = white. */
#include "attn/sparse/mask_png.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; ++n) {
        uint32_t c = n;
        for (int k = 0; k < 8; ++k)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; ++i)
        crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return crc;
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* One chunk: length, type, data, CRC-32 of type and data. */
static int write_chunk(FILE *f, const char type[4], const uint8_t *data, size_t n) {
    uint8_t head[8], tail[4];
    put32(head, (uint32_t)n);
    memcpy(head + 4, type, 4);
    uint32_t crc = crc_update(0xffffffffu, head + 4, 4);
    crc = crc_update(crc, data, n) ^ 0xffffffffu;
    put32(tail, crc);
    return fwrite(head, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) &&
                   fwrite(tail, 1, 4, f) == 4
               ? 0
               : -1;
}

int attn_mask_png_write(const char *path, int width, int height,
                        int (*black)(const void *ctx, int y, int x), const void *ctx) {
    if (width < 1 || height < 1) {
        errno = EINVAL;
        return -1;
    }
    crc_init();
    const size_t stride = 1 + ((size_t)width + 7) / 8; /* filter byte + pixels */
    const size_t raw_len = stride * (size_t)height;
    const size_t blocks = (raw_len + 65534) / 65535;
    const size_t idat_len = 2 + raw_len + 5 * blocks + 4; /* zlib header, blocks, Adler-32 */
    uint8_t *raw = malloc(raw_len), *idat = malloc(idat_len);
    FILE *f = raw && idat ? fopen(path, "wb") : NULL;
    if (f == NULL) {
        int err = raw && idat ? errno : ENOMEM;
        free(raw);
        free(idat);
        errno = err;
        return -1;
    }
    memset(raw, 0xff, raw_len); /* white */
    for (int y = 0; y < height; ++y) {
        uint8_t *row = raw + stride * (size_t)y;
        row[0] = 0;
        for (int x = 0; x < width; ++x)
            if (black(ctx, y, x))
                row[1 + x / 8] &= (uint8_t) ~(0x80u >> (x % 8));
    }
    uint8_t *q = idat;
    *q++ = 0x78;           /* zlib: deflate, 32 KiB window */
    *q++ = 0x01;           /* no dictionary, fastest; (0x78 * 256 + 0x01) % 31 == 0 */
    uint32_t a = 1, b = 0; /* Adler-32 */
    for (size_t at = 0; at < raw_len; at += 65535) {
        size_t n = raw_len - at < 65535 ? raw_len - at : 65535;
        *q++ = at + n == raw_len; /* BFINAL on the last block, BTYPE 00: stored */
        *q++ = (uint8_t)n;
        *q++ = (uint8_t)(n >> 8);
        *q++ = (uint8_t)~n;
        *q++ = (uint8_t)(~n >> 8);
        memcpy(q, raw + at, n);
        q += n;
        for (size_t i = 0; i < n; ++i) {
            a = (a + raw[at + i]) % 65521;
            b = (b + a) % 65521;
        }
    }
    put32(q, b << 16 | a);
    uint8_t ihdr[13];
    put32(ihdr, (uint32_t)width);
    put32(ihdr + 4, (uint32_t)height);
    ihdr[8] = 1;  /* bit depth */
    ihdr[9] = 0;  /* greyscale */
    ihdr[10] = 0; /* deflate */
    ihdr[11] = 0; /* adaptive filtering (every line: none) */
    ihdr[12] = 0; /* not interlaced */
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    int bad = fwrite(signature, 1, 8, f) != 8 || write_chunk(f, "IHDR", ihdr, 13) != 0 ||
              write_chunk(f, "IDAT", idat, idat_len) != 0 || write_chunk(f, "IEND", NULL, 0) != 0;
    int err = errno;
    bad |= fclose(f) != 0;
    free(raw);
    free(idat);
    if (bad) {
        remove(path);
        errno = err ? err : EIO;
        return -1;
    }
    return 0;
}
