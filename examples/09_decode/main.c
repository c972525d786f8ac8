/* main.c — Example 09's program: the one driver (common/src/example.c) runs the stages of
 * decode.cu (append -> attention -> indexer -> top-k -> sparse, each checked; flags: --help). */
#include "attn/example.h"

extern const attn_example decode_example; /* decode.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &decode_example); }
