/* split_table.c — the split counts of example 09's two rules (decode_host.c: ours and
 * FlashAttention-2's heuristic) on an H100 (132 SMs), as the markdown table README.md quotes
 * ("How many splits"; make_tables.py --check compares the two). */
#include <stdio.h>

#include "decode.h"

int main(void) {
    const struct {
        const char *model;
        int H, H_kv, D;
    } heads[] = {
        {"SmolLM2-135M", 9, 3, 64}, {"Llama-3-8B", 32, 8, 128}, {"MQA, 32 heads", 32, 1, 128}};
    const int Bs[] = {1, 4, 16, 64}, Ls[] = {1024, 8192, 32768, 131072};
    const int nL = (int)(sizeof Ls / sizeof Ls[0]);
    printf("| heads (H / H_kv, D) | B | blocks per split |");
    for (int l = 0; l < nL; ++l)
        printf(" %dK |", Ls[l] / 1024);
    printf("\n|---|---:|---:|");
    for (int l = 0; l < nL; ++l)
        printf("---:|");
    printf("\n");
    for (size_t m = 0; m < sizeof heads / sizeof heads[0]; ++m)
        for (size_t b = 0; b < sizeof Bs / sizeof Bs[0]; ++b) {
            const int blocks = dec_blocks_per_split(Bs[b], heads[m].H, heads[m].H_kv, 1);
            printf("| %s (%d / %d, %d) | %d | %d |", heads[m].model, heads[m].H, heads[m].H_kv,
                   heads[m].D, Bs[b], blocks);
            for (int l = 0; l < nL; ++l)
                printf(" %d / %d |", dec_splits_ours(132, blocks, Ls[l]),
                       dec_splits_flash(132, blocks, Ls[l], heads[m].D));
            printf("\n");
        }
    return 0;
}
