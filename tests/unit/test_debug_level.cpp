// TPUTRAIN_DEBUG's one parse (runtime/debug_level.h), which the interpreter and the engine share.
#include <doctest.h>

#include "runtime/debug_level.h"

using tpu::parse_debug_level;

TEST_CASE("TPUTRAIN_DEBUG: unset, empty or 0 is off; a positive number is its level; other text is 1") {
  CHECK(parse_debug_level(nullptr) == 0);
  CHECK(parse_debug_level("") == 0);
  CHECK(parse_debug_level("0") == 0);
  CHECK(parse_debug_level("1") == 1);
  CHECK(parse_debug_level("2") == 2);
  CHECK(parse_debug_level("3") == 3);
  CHECK(parse_debug_level("yes") == 1);
  CHECK(parse_debug_level("-1") == 1);
}
