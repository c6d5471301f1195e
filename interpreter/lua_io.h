// The file functions of the Lua `tpu.core` table (the C side of tpu.save/load, model:save/load,
// tpu.checkpoint and the SVG/CSV writers).
//
//   tpu::register_io_functions(L, core_table_index);
//
// core.save_safetensors(path, {name = tensor, ...}[, {key = "text", ...}])
//     writes atomically (temporary file in the same directory, fsync, rename, fsync directory)
// core.load_safetensors(path) -> {name = tensor, ...}, metadata {key = "text"}, names in file order
// core.write_file_atomic(path, text)
// core.f32_bytes(tensor) -> a concrete f32 tensor's elements as little-endian bytes
// Errors start with the user's file:line, then the path and what is wrong.
#pragma once

struct lua_State;

namespace tpu {

void register_io_functions(lua_State* L, int core_table_index);

}  // namespace tpu
