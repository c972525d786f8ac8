/* main.c — Example 07's program: the one driver (common/src/example.c) runs the stages of
 * flash_bwd.cu (the forward of examples 03-05, then the backward versions, each checked;
 * flags: --help). */
#include "attn/example.h"

extern const attn_example flash_bwd_example; /* flash_bwd.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &flash_bwd_example); }
