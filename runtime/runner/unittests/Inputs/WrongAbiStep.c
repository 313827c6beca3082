/* A step library stamped by another release (runtime ABI 999, step ABI 7):
   the runner must refuse it, naming both versions, before calling it. */
#include <stdint.h>

const uint32_t fsdp_abi_stamp[2] = {999, 7};
const char fsdp_program[] = "{}";
