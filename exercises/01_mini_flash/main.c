/* main.c — Exercise 01's program: the shared harness drives the kernel of mini_flash.cu
 * (flags: --help; checking, timing and reporting: common/src/example.c). The solution's program
 * (solutions/01_mini_flash) is built from this same file. */
#include "attn/example.h"

extern const attn_example mini_flash_example; /* mini_flash.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &mini_flash_example); }
