/* main.c — Example 12's program: the one driver (common/src/example.c) runs the stages of
 * deepseek_v4.cu (compress -> index -> attention, prefill and decode, each checked; flags: --help).
 */
#include "attn/example.h"

extern const attn_example deepseek_v4_example; /* deepseek_v4.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &deepseek_v4_example); }
