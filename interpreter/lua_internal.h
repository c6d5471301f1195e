// Internals shared by the Lua binding files: the tensor userdata, traces, and op application.
#pragma once
#include <lua.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"
#include "runtime/float_mode.h"
#include "lua_tensor.h"

namespace tpu {

class Executable;

inline constexpr const char* kTensorMeta = "tpu.Tensor";
inline constexpr const char* kExecutableMeta = "tpu.Executable";

// Traces count up from 1 in a process (0: not traced); 32 bits keep the userdata small.
using TraceId = uint32_t;

// A graph being recorded by tpu.jit (or tpu.grad called eagerly).
struct Trace {
  TraceId id = 0;
  std::string name;
  Graph graph;
  std::vector<std::pair<std::shared_ptr<const Tensor>, NodeId>> captured;  // concrete -> constant
  bool optimize = true;  // its compile runs the pass pipeline (a template applied in it is fused)
  // Where ops traced outside the user's code and outside any layer are placed (an optimizer's
  // update inside fit): the user's frame under the one that began the trace, which stays put
  // while the trace runs. The thread and the levels of its stack when the trace began (an op
  // in a coroutine searches the whole of the coroutine's stack); the frame's location, found
  // at the first such op.
  const lua_State* base_thread = nullptr;
  int base_depth = 0;
  std::optional<int32_t> base_location;
};

// Levels on the Lua stack: lua_getstack(L, level) succeeds for level < lua_stack_depth(L).
int lua_stack_depth(lua_State* L);

// A tensor as Lua holds it (its userdata): concrete (trace_id == 0) or traced (node `node` of
// trace `trace_id`). A traced value is this header alone: a deep model's trace makes hundreds
// of thousands of them (48 bytes each with Lua's header, where a whole Tensor made 112). A
// concrete tensor's userdata holds its Tensor right after the header.
struct LuaTensor {
  TraceId trace_id = 0;
  NodeId node = -1;
  std::unique_ptr<const std::string> donated_to;  // the jit function that took this tensor's buffer
  Tensor& value();  // a concrete tensor's value (not for traced ones)
  const Tensor& value() const;
  DType dtype() const;
  const Shape& shape() const;
  bool traced() const { return trace_id != 0; }
};
// Where a concrete tensor's value sits in its userdata (Lua aligns userdata for any C type).
inline constexpr size_t kTensorValueOffset =
    (sizeof(LuaTensor) + alignof(Tensor) - 1) / alignof(Tensor) * alignof(Tensor);
inline Tensor& LuaTensor::value() {
  return *std::launder(reinterpret_cast<Tensor*>(reinterpret_cast<std::byte*>(this) + kTensorValueOffset));
}
inline const Tensor& LuaTensor::value() const { return const_cast<LuaTensor*>(this)->value(); }

LuaTensor* check_tensor(lua_State* L, int arg);  // also rejects donated tensors
void mark_donated(LuaTensor* t, const std::string& function);
LuaTensor* test_tensor(lua_State* L, int arg);
// The compiled executable at `arg` (core.trace_end's result), or null.
std::shared_ptr<Executable> test_executable(lua_State* L, int arg);
void push_traced(lua_State* L, TraceId trace_id, NodeId node);
// Restarts the collector, stopped while tracing, once the Lua heap outgrows the limit its
// trace_begin set (called for each new traced value).
void watch_trace_heap(lua_State* L);
Trace* active_trace();                 // innermost trace being recorded, or nullptr
Trace& require_trace();                // innermost trace being recorded; throws without one
Trace* trace_by_id(TraceId id);        // nullptr if it has ended
std::vector<std::unique_ptr<Trace>>& trace_stack();

// An operand of an op call: a tensor or a Lua number (which takes its dtype from the others).
struct Operand {
  LuaTensor* tensor = nullptr;
  double number = 0;
};

// The operand's node in the trace: its own (traced), a constant of the trace (a concrete
// tensor, once per buffer) or a scalar of `number_dtype` (a Lua number).
NodeId operand_node(Trace& tr, const Operand& o, DType number_dtype);

// Builds the op on a graph from the operands' nodes and returns the result node.
using Builder = std::function<NodeId(Graph& g, const std::vector<NodeId>& in)>;

// Applies `build` to the operands: traced when any operand is traced (recording into that
// trace), otherwise evaluated eagerly. Pushes the result tensor. Throws: call it only inside a
// boundary, which raises the error at the user's line.
int apply_op(lua_State* L, const std::vector<Operand>& operands, DType number_dtype, const Builder& build);
int apply_op_multi(lua_State* L, const std::vector<Operand>& operands, DType number_dtype,
                   const std::function<std::vector<NodeId>(Graph&, const std::vector<NodeId>&)>& build);

// Throws the message as an Error: the boundary raises it at the user's line. Like every checker
// here, call it only inside a boundary (every function the binding registers runs in one).
[[noreturn]] void raise_user_error(lua_State* L, const std::string& message);
// Pushes an error object the stdlib tells apart without reading its text: a table
// {kind = kind, message = message} whose tostring is the message.
void push_error_object(lua_State* L, const char* kind, const std::string& message);

// An argument error thrown inside a boundary; raised there in Lua's wording (raise_arg_error).
struct ArgError : Error {
  int arg;
  ArgError(int a, const std::string& message) : Error(message), arg(a) {}
};
ArgError type_error(lua_State* L, int arg, const std::string& expected);  // "<expected> expected, got <type>"
void push_arg_error(lua_State* L, int arg, const std::string& message);

// Runs body (which pushes its results and returns how many) and turns a tpu::Error or an
// allocation failure into a message at the user's line: returns the result count, or -1 with
// the message pushed. finish() then raises it, once the body's C++ objects are destroyed (a
// Lua error longjmps past destructors).
template <class F>
int guarded(lua_State* L, F body, const char* out_of_memory = "out of memory") {
  const FlushSubnormalsScope float_mode;  // the host's own mode again before finish() raises
  try {
    return body();
  } catch (const ArgError& e) {
    push_arg_error(L, e.arg, e.what());
  } catch (const ResourceExhausted& e) {
    push_error_object(L, "ResourceExhausted", user_where(L) + e.what());
  } catch (const Error& e) {
    lua_pushstring(L, (user_where(L) + e.what()).c_str());
  } catch (const std::bad_alloc&) {
    lua_pushstring(L, (user_where(L) + out_of_memory).c_str());
  } catch (const std::exception& e) {  // the standard library's own (a filesystem error, ...)
    lua_pushstring(L, (user_where(L) + e.what()).c_str());
  }
  return -1;
}

inline int finish(lua_State* L, int results) { return results < 0 ? lua_error(L) : results; }

// The one way into a C function from Lua: F reports errors by throwing (Error, ArgError,
// ResourceExhausted, bad_alloc) and they are raised here, once F's C++ objects are destroyed.
// F's own luaL_check* calls must come before it holds any.
template <lua_CFunction F>
int boundary(lua_State* L) {
  return finish(L, guarded(L, [L] { return F(L); }, "out of host memory"));
}

// An entry of a registration table. Made only by fn<F>, so every C function the binding
// registers runs behind the boundary.
struct LuaFunction {
  const char* name;
  lua_CFunction func;
};
std::unordered_set<lua_CFunction>& boundary_functions();  // every boundary<F> handed to Lua

template <lua_CFunction F>
LuaFunction fn(const char* name) {
  boundary_functions().insert(boundary<F>);
  return {name, boundary<F>};
}
// table[name] = func for each entry; `table` is a stack index (luaL_setfuncs for LuaFunction).
void set_functions(lua_State* L, int table, std::span<const LuaFunction> functions);
// Pushes F behind the boundary (a metamethod, a function set on its own).
template <lua_CFunction F>
void push_function(lua_State* L) {
  boundary_functions().insert(boundary<F>);
  lua_pushcfunction(L, boundary<F>);
}

// Argument errors worded like Lua's own libraries ("bad argument #1 to 'sum' (number expected,
// got string)"), but located at the user's line even when a library function made the call.
// They throw ArgError, which the boundary raises.
[[noreturn]] void raise_arg_error(lua_State* L, int arg, const std::string& message);
[[noreturn]] void raise_type_error(lua_State* L, int arg, const std::string& expected);
// Argument arg is absent/nil or an option table whose string keys are all in `allowed`
// (a typo is an error naming the key, never ignored). Returns whether it is a table.
bool check_options(lua_State* L, int arg, std::initializer_list<const char*> allowed);
// Arguments after `last` must be absent (nil counts as absent).
void check_no_more(lua_State* L, int last);

// Rule 1 (DESIGN section 5): a Lua branch or conversion on a traced value.
[[noreturn]] void raise_data_dependent(lua_State* L, const LuaTensor& t, const std::string& what);

// Shapes and axes between Lua (1-based, negative from the end) and the engine.
// A shape argument (an integer or a list of them); a shape that breaks the rule of core/shape.h
// raises "<call>: shape {a, b} <fault>" at the user's line.
Shape check_shape(lua_State* L, int arg, const char* call);
void check_lua_shape(lua_State* L, std::span<const int64_t> s, const char* call);
std::string lua_shape_str(std::span<const int64_t> s);  // {3, 4}
// -> 0-based; the axis is argument arg, or at stack index `at` (an entry of argument arg's list).
int64_t check_axis(lua_State* L, int arg, int64_t rank, int at = 0);
// nil = all; sorted. An axis listed twice ({1, -2} of a matrix) raises "<op>: axis list ...".
std::vector<int64_t> check_axes(lua_State* L, int arg, int64_t rank, const char* op);
// Throws when two of `axes` (0-based; `given` as the user wrote them) are the same axis.
void check_distinct_axes(const char* op, std::span<const int64_t> given, std::span<const int64_t> axes);
void push_shape(lua_State* L, const Shape& s);
DType check_dtype(lua_State* L, int arg);
// The dtype in option `field`, on top of the stack.
DType check_dtype_field(lua_State* L, const char* field);
DType opt_dtype_field(lua_State* L, int arg, DType def);

// Held while a file is written: a second signal waits for the file to be complete.
struct InterruptShield {
  InterruptShield();
  ~InterruptShield();
  InterruptShield(const InterruptShield&) = delete;
  InterruptShield& operator=(const InterruptShield&) = delete;
};

void register_tensor_ops(lua_State* L, int methods, int core);
// conv2d and pools as tensor methods, attention in core (lua_nn_ops.cpp)
void register_nn_ops(lua_State* L, int methods, int core);
void register_trace_functions(lua_State* L, int core);
void register_template_functions(lua_State* L, int core);  // lua_template.cpp
// Drops trace `id` if it is the innermost one (trace_end's and trace_end_template's end).
void pop_trace(TraceId id);
// The list at `list` (tensors of trace t, or concrete ones: constants) as t's graph's outputs;
// `who` names the caller in errors.
void set_trace_outputs(lua_State* L, int list, Trace& t, const char* who);
// The TPUTRAIN_OPT environment variable's default for running the pass pipeline (on unless 0).
bool optimize_by_default();
void register_random_functions(lua_State* L, int core);
void register_signature_functions(lua_State* L, int core);  // jit signatures (lua_signature.cpp)
void register_system_functions(lua_State* L, int core);
void register_mpi_functions(lua_State* L, int core);
std::string format_tensor(const Tensor& t);

}  // namespace tpu
