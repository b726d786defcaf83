// lumen command line: run | info (more subcommands later).
#include <stdio.h>
int main(void) { puts("lumen: under construction"); return 0; }
