#ifndef LIVERELAY_CFUZZERDRIVER_H
#define LIVERELAY_CFUZZERDRIVER_H
#include <stddef.h>
#include <stdint.h>

/// libFuzzer's own driver (compiler-rt's FuzzerDriver.cpp, linked by -sanitize=fuzzer).
/// SwiftPM links Linux executables with `--defsym main=<Target>_main`, which
/// shadows libFuzzer's main(); each target's `<Target>_main` calls this instead.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*UserCb)(const uint8_t *Data, size_t Size));

#endif
