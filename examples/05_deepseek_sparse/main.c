/* main.c — Example 05's program: the one driver (common/src/example.c) runs the stages of
 * deepseek_sparse.cu (indexer -> top-k -> attention, each checked; flags: --help). */
#include "attn/example.h"

extern const attn_example deepseek_sparse_example; /* deepseek_sparse.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &deepseek_sparse_example); }
