// The unit-test binary's entry point (doctest), in tputrain's floating-point mode.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest.h>

#include "runtime/float_mode.h"

int main(int argc, char** argv) {
  tpu::flush_subnormals();
  doctest::Context context(argc, argv);
  return context.run();
}
