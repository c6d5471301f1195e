// The tensor userdata shared by every Lua binding: concrete (a host Tensor) or traced
// (a node of the graph being traced by tpu.jit).
#pragma once
#include <string>

#include "core/tensor.h"

struct lua_State;

namespace tpu {

void push_tensor(lua_State* L, Tensor t);             // pushes a concrete tensor
const Tensor& check_concrete(lua_State* L, int arg);  // raises a Lua error if traced or not a tensor
bool is_tensor(lua_State* L, int arg);

// "script.lua:12: " for the innermost stack frame that is user code (not the embedded
// stdlib); "" when there is none. Errors the user sees start with it.
std::string user_where(lua_State* L);

}  // namespace tpu
