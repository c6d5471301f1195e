// The data functions of the Lua `tpu.core` table (the C side of stdlib/tpu/data).
//
//   lua_getfield(L, -1, "core");          // the core table on the stack
//   tpu::register_data_functions(L, -1);  // core.read_idx(path) -> u8/i32/f32 tensor
#pragma once

struct lua_State;

namespace tpu {

void register_data_functions(lua_State* L, int core_table_index);

}  // namespace tpu
