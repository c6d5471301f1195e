// The data functions of the Lua `tpu.core` table (the C side of stdlib/tpu/data).
//
//   lua_getfield(L, -1, "core");          // the core table on the stack
//   tpu::register_data_functions(L, -1);
//
// core.read_idx(path), core.read_npy(path) -> tensor
// core.read_csv(path, {delimiter, header, features, feature_dtype, label, label_dtype,
//               label_classes}) -> features [rows, k], labels [rows] or nil, feature names
// core.pad_stack(tensors, shape, value) -> [#tensors, shape...] (each padded at the end)
// core.gather_rows(tensor, indices) -> [#indices, ...] (rows at 0-based indices)
// core.regular_files(dir) -> sorted names of the regular files (no links, no directories)
// core.batch_prefetcher(tensors or image reader, depth) -> a BatchPrefetcher (lua_prefetch.cpp):
//   p:push(indices)  p:pop() -> list of tensors or nil  p:pending()  p:stats()  p:close()
// core.list_image_folder, image_batch_reader, read_image, write_image, resize_matrix:
//   see lua_image.cpp
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

struct lua_State;

namespace tpu {

void register_data_functions(lua_State* L, int core_table_index);

// The list of integers at `arg` (0-based row numbers); a Lua error "<what>: index i is not an
// integer" otherwise, raised before any C++ object exists (the caller must hold none either).
std::vector<int64_t> row_indices(lua_State* L, int arg, const char* what);

// Pushes a list of strings; a list of tensors (a batch, one per component).
void push_strings(lua_State* L, const std::vector<std::string>& v);
void push_tensors(lua_State* L, std::vector<Tensor> tensors);

struct ImageBatchSpec;
// The image reader (core.image_batch_reader) at `arg`, or null when it is something else.
std::shared_ptr<const ImageBatchSpec> test_image_reader(lua_State* L, int arg);

// Adds the image functions (lua_image.cpp) to the table at core_table_index.
void register_image_functions(lua_State* L, int core_table_index);

// Adds core.batch_prefetcher to the table at core_table_index (lua_prefetch.cpp).
void register_prefetcher(lua_State* L, int core_table_index);

}  // namespace tpu
