// TPUTRAIN_DEBUG, read in one place for the interpreter and the engine.
#pragma once

namespace tpu {

// The level TPUTRAIN_DEBUG asks for, read once: 0 when unset, empty or "0"; its number when it
// is a positive one; 1 for any other text. 1: Lua tracebacks with errors; 2: also the time of
// each compile pass and stage.
int debug_level();

// The level a TPUTRAIN_DEBUG value v (or nullptr) asks for, by the rule above.
int parse_debug_level(const char* v);

}  // namespace tpu
