// Tracing primitives for stdlib/tpu/jit.lua: begin/end a trace, make parameters, compile to
// an executable and run it; reverse-mode gradients on the active trace; clocks and terminals.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "autodiff/gradients.h"
#include "core/error.h"
#include "lua_internal.h"
#include "runtime/executable.h"
#include "runtime/tpu_system.h"

namespace tpu {

namespace {

TraceId next_trace_id() {
  static TraceId id = 0;
  if (id == std::numeric_limits<TraceId>::max()) throw Error("more than 4294967295 traces in one process");
  return ++id;
}

// The Lua heap size (KiB) above which a traced value restarts the collector, which tpu/jit.lua
// stops while it traces; 0 while no limit is watched.
lua_Integer restart_collector_above_kb = 0;

// core.trace_begin(name[, restart_collector_above_kb[, optimize]]): optimize (default: the
// TPUTRAIN_OPT environment's) says whether the compile will run the pass pipeline.
int l_trace_begin(lua_State* L) {
  const char* name = luaL_optstring(L, 1, "jit");
  if (lua_isinteger(L, 2)) restart_collector_above_kb = lua_tointeger(L, 2);
  auto t = std::make_unique<Trace>();
  t->optimize = lua_isnoneornil(L, 3) ? optimize_by_default() : lua_toboolean(L, 3);
  t->id = next_trace_id();
  t->name = name;
  t->graph.name = t->name;
  t->graph.share_scalars(true);
  t->base_thread = L;
  t->base_depth = lua_stack_depth(L);
  trace_stack().push_back(std::move(t));
  return 0;
}

// core.trace_param(dtype, shape) -> traced tensor
// core.trace_param(tensor[, rows]) -> a traced tensor of the tensor's type, with `rows` rows if
// given (a replica's share): a compile traces one per argument leaf, read without a shape table.
int l_trace_param(lua_State* L) {
  Trace& t = require_trace();
  DType dt;
  Shape s;
  if (test_tensor(L, 1)) {
    const LuaTensor* like = check_tensor(L, 1);  // not a donated or released one
    dt = like->dtype();
    s = like->shape();
    if (!lua_isnoneornil(L, 2)) {
      int ok = 0;
      const lua_Integer rows = lua_tointegerx(L, 2, &ok);
      if (!ok || rows < 0 || s.empty()) throw ArgError(2, "rows must be a count of the tensor's leading dimension");
      s[0] = rows;
    }
  } else {
    dt = check_dtype(L, 1);
    s = check_shape(L, 2, "jit");
  }
  t.graph.current_loc = -1;
  push_traced(L, t.id, t.graph.parameter(dt, s));
  return 1;
}

}  // namespace

void pop_trace(TraceId id) {
  auto& st = trace_stack();
  if (!st.empty() && st.back()->id == id) st.pop_back();
  if (st.empty()) restart_collector_above_kb = 0;
}

namespace {

// core.trace_abort(): drop the innermost trace (after an error while tracing).
int l_trace_abort(lua_State*) {
  if (!trace_stack().empty()) trace_stack().pop_back();
  if (trace_stack().empty()) restart_collector_above_kb = 0;
  return 0;
}

}  // namespace

void watch_trace_heap(lua_State* L) {
  static int countdown = 4096;  // the count is cheap, but not free: checked every 4096 values
  if (restart_collector_above_kb == 0 || --countdown > 0) return;
  countdown = 4096;
  if (lua_gc(L, LUA_GCCOUNT) > restart_collector_above_kb) {
    lua_gc(L, LUA_GCRESTART);
    restart_collector_above_kb = 0;
  }
}

namespace {

struct LuaExecutable {
  std::shared_ptr<Executable> exe;
};

LuaExecutable* check_executable(lua_State* L, int arg) {
  return static_cast<LuaExecutable*>(luaL_checkudata(L, arg, kExecutableMeta));
}

// Options of trace_end: {optimize= (default: trace_begin's), donate={bool per parameter},
// dump_dir=, dump_name=, hbm_version="v2"|"v3"|"v4" (check the plan against one core of it),
// arg_label=function(j) (what parameter j is, for that check's report: param_label)}.
CompileOptions compile_options(lua_State* L, int arg, bool optimize, std::string& dump_dir, std::string& dump_name,
                               std::string& hbm_version) {
  CompileOptions o;
  o.optimize = optimize;
  if (!lua_istable(L, arg)) return o;
  if (lua_getfield(L, arg, "optimize") != LUA_TNIL) o.optimize = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, arg, "donate") == LUA_TTABLE)
    for (lua_Integer i = 1; i <= luaL_len(L, -1); ++i) {
      lua_geti(L, -1, i);
      o.donated.push_back(lua_toboolean(L, -1));
      lua_pop(L, 1);
    }
  lua_pop(L, 1);
  if (lua_getfield(L, arg, "dump_dir") == LUA_TSTRING) dump_dir = lua_tostring(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, arg, "dump_name") == LUA_TSTRING) dump_name = lua_tostring(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, arg, "hbm_version") == LUA_TSTRING) hbm_version = lua_tostring(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, arg, "replicas") == LUA_TNUMBER) o.replicas = int(lua_tointeger(L, -1));
  lua_pop(L, 1);
  if (lua_getfield(L, arg, "sharded") == LUA_TTABLE)
    for (lua_Integer i = 1; i <= luaL_len(L, -1); ++i) {
      lua_geti(L, -1, i);
      o.sharded.push_back(lua_toboolean(L, -1));
      lua_pop(L, 1);
    }
  lua_pop(L, 1);
  return o;
}

// With TPUTRAIN_CHECK_IR=1 every compiled graph must print, parse back and print the same
// (the golden tests run this way, so every graph they compile exercises the parser).
void check_round_trip(const Graph& g, const std::string& stage) {
  static const bool on = [] {
    const char* v = std::getenv("TPUTRAIN_CHECK_IR");
    return v && std::strcmp(v, "1") == 0;
  }();
  if (!on) return;
  std::string text = print_graph(g);
  std::string again = print_graph(parse_graph(text));
  if (again != text) throw Error("IR round trip changed graph '" + g.name + "' (" + stage + ")");
}

// Writes the graph before and after the pipeline to DIR/NAME.before.txt and NAME.after.txt.
void dump_stage(const std::string& dir, const std::string& name, const std::string& stage, const Graph& g) {
  std::string file = dir + "/" + name + "." + stage + ".txt";
  std::ofstream out(file);
  if (!out) throw Error("--dump-graphs: cannot write " + file);
  out << print_graph(g);
}

// What parameter `param` (0-based) is: options.arg_label(param + 1) for the options table at
// `arg`, or "" (no such function, or it failed: the report then numbers the argument).
std::string param_label(lua_State* L, int arg, size_t param) {
  std::string label;
  if (!lua_istable(L, arg)) return label;
  if (lua_getfield(L, arg, "arg_label") == LUA_TFUNCTION) {  // pcall leaves one value, as getfield
    lua_pushinteger(L, lua_Integer(param) + 1);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING) label = lua_tostring(L, -1);
  }
  lua_pop(L, 1);
  return label;
}

// core.trace_end(outputs[, options]) -> executable: the outputs (a list of tensors) end the trace.
int trace_end(lua_State* L) {
  Trace& t = require_trace();
  luaL_checktype(L, 1, LUA_TTABLE);
  std::string dump_dir, dump_name, hbm_version;
  CompileOptions options = compile_options(L, 2, t.optimize, dump_dir, dump_name, hbm_version);
  set_trace_outputs(L, 1, t, "trace_end");
  Graph& g = t.graph;
  if (!dump_dir.empty()) {
    std::filesystem::create_directories(dump_dir);
    dump_stage(dump_dir, dump_name, "before", g);
  }
  check_round_trip(g, "before the pipeline");
  auto exe = std::make_shared<Executable>(Executable::compile(std::move(g), options));
  check_round_trip(exe->graph(), "after the pipeline");
  if (const TpuVersion* v = find_tpu_version(hbm_version)) {
    try {
      hbm_check(*exe, *v, [L](size_t param) { return param_label(L, 2, param); });
    } catch (const ResourceExhausted&) {
      pop_trace(t.id);
      throw;
    }
  }
  if (!dump_dir.empty()) dump_stage(dump_dir, dump_name, "after", exe->graph());
  pop_trace(t.id);
  void* p = lua_newuserdatauv(L, sizeof(LuaExecutable), 0);
  new (p) LuaExecutable{std::move(exe)};
  luaL_setmetatable(L, kExecutableMeta);
  return 1;
}

// exe:run(list of tensors) -> list of tensors
int exe_run(lua_State* L) {
  LuaExecutable* e = check_executable(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  std::vector<Tensor> args;
  const lua_Integer n = luaL_len(L, 2);
  args.reserve(size_t(n));
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, 2, i);
    LuaTensor* t = check_tensor(L, -1);
    if (t->traced()) throw Error("run: argument " + std::to_string(i) + " is not a concrete tensor");
    args.push_back(t->value());
    lua_pop(L, 1);
  }
  // A donated buffer is overwritten with results. One held by more than this Lua tensor and
  // `args` is shared (a batch that is a view of its data set, an argument passed twice): that
  // argument is donated as a copy, so donating one tensor never changes another.
  for (int32_t p : e->exe->donated_args())
    if (args[size_t(p)].buffer_holders() > 2) args[size_t(p)] = args[size_t(p)].copy();
  std::vector<Tensor> out = e->exe->run(args);
  args.clear();
  // Donated arguments now hold results: their Lua tensors are consumed (using one is an error).
  for (int32_t p : e->exe->donated_args()) {
    lua_geti(L, 2, p + 1);
    mark_donated(test_tensor(L, -1), e->exe->graph().name);
    lua_pop(L, 1);
  }
  lua_createtable(L, int(out.size()), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    push_tensor(L, std::move(out[i]));
    lua_seti(L, -2, lua_Integer(i + 1));
  }
  return 1;
}

// exe:per_replica() -> list of booleans: which results come back stacked [replicas, ...].
int l_exe_per_replica(lua_State* L) {
  const Executable& e = *check_executable(L, 1)->exe;
  lua_createtable(L, int(e.graph().outputs.size()), 0);
  for (size_t i = 0; i < e.graph().outputs.size(); ++i) {
    lua_pushboolean(L, e.replicas() > 1 && e.output_per_replica(i));
    lua_seti(L, -2, lua_Integer(i + 1));
  }
  return 1;
}

// core.all_reduce(x, "sum"|"mean"): across the replicas of a replicated step.
int all_reduce(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  const char* kind = luaL_optstring(L, 2, "sum");
  int64_t k = std::strcmp(kind, "mean") == 0 ? 1 : std::strcmp(kind, "sum") == 0 ? 0 : -1;
  if (k < 0) throw Error(std::string("all_reduce: unknown reduction '") + kind + "' (expected \"sum\" or \"mean\")");
  return apply_op(L, {{t, 0}}, DType::f32, [k](Graph& g, const std::vector<NodeId>& in) {
    return g.all_reduce(in[0], k == 1);
  });
}

int l_exe_text(lua_State* L) {
  std::string s = print_graph(check_executable(L, 1)->exe->graph());
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

int l_exe_info(lua_State* L) {
  LuaExecutable* e = check_executable(L, 1);
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, lua_Integer(e->exe->num_kernels()));
  lua_setfield(L, -2, "kernels");
  lua_pushinteger(L, lua_Integer(e->exe->donated_args().size()));
  lua_setfield(L, -2, "donated");
  lua_pushinteger(L, lua_Integer(e->exe->planned_bytes()));
  lua_setfield(L, -2, "planned_bytes");
  lua_pushinteger(L, lua_Integer(e->exe->graph().nodes.size()));
  lua_setfield(L, -2, "nodes");
  lua_pushinteger(L, lua_Integer(e->exe->hbm_bytes()));
  lua_setfield(L, -2, "hbm_bytes");
  Cost c = e->exe->cost();
  lua_pushnumber(L, c.flops);
  lua_setfield(L, -2, "flops");
  lua_pushnumber(L, c.bytes);
  lua_setfield(L, -2, "bytes");
  return 1;
}

void push_int_list(lua_State* L, const Shape& s) {
  lua_createtable(L, int(s.size()), 0);
  for (size_t i = 0; i < s.size(); ++i) {
    lua_pushinteger(L, s[i]);
    lua_seti(L, -2, lua_Integer(i + 1));
  }
}

// exe:nodes() -> one table per executed node: {op=, dtype=, shape=, inputs={shape...}, loc=,
// flops=, bytes=} (for the cost report and the advisor).
int l_exe_nodes(lua_State* L) {
  const Graph& g = check_executable(L, 1)->exe->graph();
  lua_newtable(L);
  lua_Integer k = 0;
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    const Node& node = g.at(n);
    if (node.op == Op::parameter || node.op == Op::constant) continue;
    lua_createtable(L, 0, 7);
    lua_pushstring(L, std::string(op_name(node.op)).c_str());
    lua_setfield(L, -2, "op");
    lua_pushstring(L, std::string(name_of(node.dtype)).c_str());
    lua_setfield(L, -2, "dtype");
    push_int_list(L, node.shape);
    lua_setfield(L, -2, "shape");
    lua_createtable(L, int(node.in.size()), 0);
    for (size_t i = 0; i < node.in.size(); ++i) {
      push_int_list(L, g.at(node.in[i]).shape);
      lua_seti(L, -2, lua_Integer(i + 1));
    }
    lua_setfield(L, -2, "inputs");
    lua_pushstring(L, g.location_of(n).c_str());
    lua_setfield(L, -2, "loc");
    Cost c = op_info(node.op).cost(g, node);
    lua_pushnumber(L, c.flops);
    lua_setfield(L, -2, "flops");
    lua_pushnumber(L, c.bytes);
    lua_setfield(L, -2, "bytes");
    if (node.op == Op::dot) {
      lua_pushboolean(L, node.attrs.transpose_lhs);
      lua_setfield(L, -2, "ta");
    }
    if (node.op == Op::dot || node.op == Op::conv) {  // a conv's filter stored [Kh,Kw,O,C]
      lua_pushboolean(L, node.attrs.transpose_rhs);
      lua_setfield(L, -2, "tb");
    }
    lua_seti(L, -2, ++k);
  }
  return 1;
}

// exe:dot() -> Graphviz DOT text of the compiled graph.
int l_exe_dot(lua_State* L) {
  const Graph& g = check_executable(L, 1)->exe->graph();
  std::string s = "digraph \"" + g.name + "\" {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    const Node& node = g.at(n);
    std::string label = "%" + std::to_string(n) + " " + std::string(op_name(node.op)) + "\\n" + type_str(node.dtype, node.shape);
    std::string loc = g.location_of(n);
    for (char& c : loc)
      if (c == '"') c = '\'';
    if (!loc.empty()) label += "\\n" + loc;
    s += "  n" + std::to_string(n) + " [label=\"" + label + "\"" +
         (node.op == Op::parameter ? ", style=filled, fillcolor=lightblue" : node.op == Op::fusion ? ", style=filled, fillcolor=lightyellow" : "") + "];\n";
    for (NodeId i : node.in) s += "  n" + std::to_string(i) + " -> n" + std::to_string(n) + ";\n";
  }
  for (size_t i = 0; i < g.outputs.size(); ++i)
    s += "  out" + std::to_string(i) + " [shape=oval, label=\"result " + std::to_string(i + 1) + "\"];\n  n" +
         std::to_string(g.outputs[i]) + " -> out" + std::to_string(i) + ";\n";
  s += "}\n";
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

int l_exe_gc(lua_State* L) {
  check_executable(L, 1)->~LuaExecutable();
  return 0;
}

// core.gradients(y, {x1, x2, ...}) -> {dx1, dx2, ...} on the active trace.
int gradients_of(lua_State* L) {
  Trace& t = require_trace();
  LuaTensor* y = check_tensor(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  if (!y->traced() || y->trace_id != t.id)
    throw Error("grad: the function's result does not depend on its traced arguments");
  std::vector<NodeId> xs;
  for (lua_Integer i = 1; i <= luaL_len(L, 2); ++i) {
    lua_geti(L, 2, i);
    LuaTensor* x = check_tensor(L, -1);
    if (!x->traced() || x->trace_id != t.id) throw Error("gradients: argument " + std::to_string(i) + " is not traced");
    xs.push_back(x->node);
    lua_pop(L, 1);
  }
  std::vector<NodeId> gs = gradients(t.graph, y->node, xs);
  lua_createtable(L, int(gs.size()), 0);
  for (size_t i = 0; i < gs.size(); ++i) {
    push_traced(L, t.id, gs[i]);
    lua_seti(L, -2, lua_Integer(i + 1));
  }
  return 1;
}

// core.lift(t): a concrete tensor as a constant node of the active trace (so it can be
// differentiated against, like a traced argument).
int l_lift(lua_State* L) {
  Trace& t = require_trace();
  LuaTensor* x = check_tensor(L, 1);
  if (x->traced()) return lua_pushvalue(L, 1), 1;
  t.graph.current_loc = -1;
  push_traced(L, t.id, t.graph.constant(x->value()));
  return 1;
}

// core.op_times() -> {{op=, seconds=, calls=}, ...}, most time first (while profiling).
int l_op_times(lua_State* L) {
  std::vector<OpTime> times = op_times();
  lua_createtable(L, int(times.size()), 0);
  for (size_t i = 0; i < times.size(); ++i) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, times[i].op.c_str());
    lua_setfield(L, -2, "op");
    lua_pushnumber(L, times[i].seconds);
    lua_setfield(L, -2, "seconds");
    lua_pushinteger(L, times[i].calls);
    lua_setfield(L, -2, "calls");
    lua_seti(L, -2, lua_Integer(i + 1));
  }
  return 1;
}

// core.kernel_times() -> {{where=, op=, type=, seconds=, calls=, first_seconds=}, ...}, most
// time first: per kernel label, its runs after the first, and the first apart (while profiling).
int l_kernel_times(lua_State* L) {
  const std::vector<KernelTime> times = kernel_times();
  lua_createtable(L, int(times.size()), 0);
  for (size_t i = 0; i < times.size(); ++i) {
    const KernelTime& k = times[i];
    lua_createtable(L, 0, 6);
    lua_pushstring(L, k.where.c_str());
    lua_setfield(L, -2, "where");
    lua_pushstring(L, k.op.c_str());
    lua_setfield(L, -2, "op");
    lua_pushstring(L, k.type.c_str());
    lua_setfield(L, -2, "type");
    lua_pushnumber(L, k.seconds);
    lua_setfield(L, -2, "seconds");
    lua_pushinteger(L, k.calls);
    lua_setfield(L, -2, "calls");
    lua_pushnumber(L, k.first_seconds);
    lua_setfield(L, -2, "first_seconds");
    lua_seti(L, -2, lua_Integer(i + 1));
  }
  return 1;
}

int l_set_op_profiling(lua_State* L) {
  set_op_profiling(lua_toboolean(L, 1));
  return 0;
}

// core.trace_name() -> name of the innermost trace, or nil.
int l_trace_name(lua_State* L) {
  Trace* t = active_trace();
  if (t) lua_pushstring(L, t->name.c_str());
  else lua_pushnil(L);
  return 1;
}

// core.tpu_version(name) -> {hbm_bytes=, peak_flops=, hbm_bandwidth=} or nil.
int l_tpu_version(lua_State* L) {
  const TpuVersion* v = find_tpu_version(luaL_checkstring(L, 1));
  if (!v) return 0;
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, lua_Integer(v->hbm_bytes));
  lua_setfield(L, -2, "hbm_bytes");
  lua_pushnumber(L, v->peak_flops);
  lua_setfield(L, -2, "peak_flops");
  lua_pushnumber(L, v->hbm_bandwidth);
  lua_setfield(L, -2, "hbm_bandwidth");
  return 1;
}

// core.padded_bytes(dtype, shape) -> bytes of such a tensor in HBM, the two minor dims padded
// to the TPU's 8x128 tiles (the memory plan's rule).
int l_padded_bytes(lua_State* L) {
  lua_pushinteger(L, lua_Integer(tpu_padded_bytes(check_dtype(L, 1), check_shape(L, 2, "padded_bytes"))));
  return 1;
}

int l_format_bytes(lua_State* L) {
  lua_pushstring(L, format_bytes(luaL_checknumber(L, 1)).c_str());
  return 1;
}

int l_trace_depth(lua_State* L) {
  lua_pushinteger(L, lua_Integer(trace_stack().size()));
  return 1;
}

const LuaFunction kExeMethods[] = {fn<exe_run>("run"),     fn<l_exe_text>("text"),
                                    fn<l_exe_info>("info"), fn<l_exe_per_replica>("per_replica"),
                                    fn<l_exe_nodes>("nodes"), fn<l_exe_dot>("dot")};
const LuaFunction kFunctions[] = {fn<l_trace_begin>("trace_begin"),   fn<l_trace_param>("trace_param"),
                                  fn<trace_end>("trace_end"),         fn<l_trace_abort>("trace_abort"),
                                  fn<l_trace_depth>("trace_depth"),   fn<gradients_of>("gradients"),
                                  fn<l_lift>("lift"),                 fn<all_reduce>("all_reduce"),
                                  fn<l_op_times>("op_times"),         fn<l_set_op_profiling>("set_op_profiling"),
                                  fn<l_trace_name>("trace_name"),     fn<l_tpu_version>("tpu_version"),
                                  fn<l_format_bytes>("format_bytes"), fn<l_padded_bytes>("padded_bytes"),
                                  fn<l_kernel_times>("kernel_times")};

}  // namespace

Trace& require_trace() {
  Trace* t = active_trace();
  if (!t) throw Error("no trace is being recorded");
  return *t;
}

void set_trace_outputs(lua_State* L, int list, Trace& t, const char* who) {
  if (!lua_istable(L, list)) throw Error(std::string(who) + ": the outputs must be a list of tensors");
  Graph& g = t.graph;
  g.share_scalars(false);  // the passes rewrite nodes in place
  g.outputs.clear();
  for (lua_Integer i = 1; i <= luaL_len(L, list); ++i) {
    lua_geti(L, list, i);
    LuaTensor* x = test_tensor(L, -1);
    lua_pop(L, 1);
    if (!x) throw Error(std::string(who) + ": output " + std::to_string(i) + " is not a tensor");
    if (!x->traced()) g.outputs.push_back(g.constant(x->value()));
    else if (x->trace_id == t.id) g.outputs.push_back(x->node);
    else throw Error("a result of '" + t.name + "' comes from another trace");
  }
}

bool optimize_by_default() {
  const char* v = std::getenv("TPUTRAIN_OPT");
  return !(v && std::strcmp(v, "0") == 0);
}

std::shared_ptr<Executable> test_executable(lua_State* L, int arg) {
  auto* e = static_cast<LuaExecutable*>(luaL_testudata(L, arg, kExecutableMeta));
  return e ? e->exe : nullptr;
}

void register_trace_functions(lua_State* L, int core) {
  luaL_newmetatable(L, kExecutableMeta);
  push_function<l_exe_gc>(L);
  lua_setfield(L, -2, "__gc");
  lua_newtable(L);
  set_functions(L, -1, kExeMethods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_pushvalue(L, core);
  set_functions(L, -1, kFunctions);
  lua_pop(L, 1);
}

}  // namespace tpu
