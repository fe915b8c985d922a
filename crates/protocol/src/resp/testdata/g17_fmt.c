#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <inttypes.h>
int main(void){ char line[64]; while (fgets(line, sizeof line, stdin)) { uint64_t b; double d; sscanf(line, "%" SCNx64, &b); memcpy(&d, &b, 8); printf("%016" PRIx64 " %.17g\n", b, d);} return 0; }
