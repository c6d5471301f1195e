// Templates: a traced computation kept as a graph, optimized once, and applied again in the
// enclosing trace to other arguments. An optimizer's update traces each parameter type (the
// dtypes and shapes of the parameter, its gradient and its slots) once this way instead of
// each parameter: in a deep model the update was most of the trace (Adam: 24 of a Dense
// layer's 41 nodes, each made by a Lua call and carried through every pass until fusion left
// 3 of them); applied, the template adds its 3 fused nodes.
//
//   core.trace_begin(name)
//   local x = core.trace_param(dtype, shape) ...          -- the template's parameters
//   local tmpl = core.trace_end_template {f(x, ...)}       -- ends that trace
//   local r1, r2 = core.apply_template(tmpl, {a, ...})     -- in the enclosing trace
#include "core/error.h"
#include "lua_internal.h"
#include "passes/pass.h"

namespace tpu {

namespace {

constexpr const char* kTemplateMeta = "tpu.Template";

// The graph as traced, and after the pass pipeline (fused; made when a trace that runs the
// pipeline first applies it). A trace compiled without the pipeline (--no-opt, tpu.jit's
// optimize = false) gets the traced one, op for op, and no pass runs for it.
struct LuaTemplate {
  std::shared_ptr<const Graph> traced, optimized;
  const Graph& for_trace(const Trace& t) {
    if (!t.optimize) return *traced;
    if (!optimized) optimized = std::make_shared<const Graph>(run_pipeline(*traced));
    return *optimized;
  }
};

LuaTemplate* check_template(lua_State* L, int arg) {
  return static_cast<LuaTemplate*>(luaL_checkudata(L, arg, kTemplateMeta));
}

int template_gc(lua_State* L) {
  check_template(L, 1)->~LuaTemplate();
  return 0;
}

// core.trace_end_template(outputs) -> template: the outputs (a list of tensors) end the
// innermost trace, whose graph becomes the template.
int trace_end_template(lua_State* L) {
  Trace& t = require_trace();
  set_trace_outputs(L, 1, t, "trace_end_template");
  Graph& g = t.graph;
  if (std::string problem = verify_graph(g); !problem.empty()) throw Error("template '" + t.name + "': " + problem);
  auto traced = std::make_shared<const Graph>(std::move(g));
  pop_trace(t.id);
  void* p = lua_newuserdatauv(L, sizeof(LuaTemplate), 0);
  new (p) LuaTemplate{std::move(traced), nullptr};
  luaL_setmetatable(L, kTemplateMeta);
  return 1;
}

// core.apply_template(template, {args}) -> results...: the template's nodes added to the
// active trace, its parameters bound to args (tensors of that trace, or concrete ones, which
// become constants of it); its results as values, not a table (no table per application).
int apply_template(lua_State* L) {
  LuaTemplate* tmpl = check_template(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  Trace& t = require_trace();
  const Graph& body = tmpl->for_trace(t);
  if (!lua_checkstack(L, int(body.outputs.size()))) throw Error("apply_template: too many results");
  std::vector<NodeId> args;
  for (lua_Integer i = 1; i <= luaL_len(L, 2); ++i) {
    lua_geti(L, 2, i);
    LuaTensor* x = test_tensor(L, -1) ? check_tensor(L, lua_gettop(L)) : nullptr;  // not a donated one
    lua_pop(L, 1);
    if (!x) throw Error("apply_template: argument " + std::to_string(i) + " is not a tensor");
    if (x->traced() && x->trace_id != t.id)
      throw Error("apply_template: argument " + std::to_string(i) + " comes from another trace");
    args.push_back(operand_node(t, Operand{x}, x->dtype()));
  }
  t.graph.current_loc = -1;  // the template's nodes carry their own places
  for (NodeId id : t.graph.inline_call(body, args)) push_traced(L, t.id, id);
  return int(body.outputs.size());
}

const LuaFunction kFunctions[] = {fn<trace_end_template>("trace_end_template"), fn<apply_template>("apply_template")};

}  // namespace

void register_template_functions(lua_State* L, int core) {
  luaL_newmetatable(L, kTemplateMeta);
  push_function<template_gc>(L);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lua_pushvalue(L, core);
  set_functions(L, -1, kFunctions);
  lua_pop(L, 1);
}

}  // namespace tpu
