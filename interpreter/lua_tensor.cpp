// The tensor userdata: creation, fields, metamethods, printing, and op application
// (eager evaluation or recording into the active trace).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "lua_data.h"
#include "lua_internal.h"
#include "lua_io.h"
#include "runtime/executable.h"
#include "runtime/signals.h"

namespace tpu {

// ---------------------------------------------------------------- traces
std::vector<std::unique_ptr<Trace>>& trace_stack() {
  static std::vector<std::unique_ptr<Trace>> stack;
  return stack;
}
Trace* active_trace() { return trace_stack().empty() ? nullptr : trace_stack().back().get(); }
Trace* trace_by_id(TraceId id) {
  for (auto& t : trace_stack())
    if (t->id == id) return t.get();
  return nullptr;
}

DType LuaTensor::dtype() const {
  if (!traced()) return value().dtype();
  Trace* t = trace_by_id(trace_id);
  return t ? t->graph.at(node).dtype : DType::f32;
}
const Shape& LuaTensor::shape() const {
  static const Shape empty;
  if (!traced()) return value().shape();
  Trace* t = trace_by_id(trace_id);
  return t ? t->graph.at(node).shape : empty;
}

// ---------------------------------------------------------------- userdata
namespace {
// A traced value's userdata is the header alone; a concrete one's holds its Tensor too.
LuaTensor* new_tensor(lua_State* L, bool concrete) {
  static_assert(alignof(Tensor) <= alignof(std::max_align_t) && alignof(LuaTensor) <= alignof(std::max_align_t));
  void* p = lua_newuserdatauv(L, concrete ? kTensorValueOffset + sizeof(Tensor) : sizeof(LuaTensor), 0);
  LuaTensor* t = new (p) LuaTensor();
  if (concrete) new (static_cast<std::byte*>(p) + kTensorValueOffset) Tensor();
  luaL_setmetatable(L, kTensorMeta);
  return t;
}
}  // namespace

// Lua's collector sees a tensor as its small userdata, not its buffer: a loop that makes large
// tensors (the batches of an epoch, say) grows the process by every dead one until the
// collector happens to run, and each new buffer costs fresh pages. So the bytes of new buffers
// pace full collections. A tensor that allocates nothing (a donated buffer reused by a step's
// result, a batch that is a view of its data set) does not hasten one.
// A full collection walks the Lua heap (about 0.13 ms per MiB of it here). With a small heap
// that is little next to the memory it returns, so one comes after kMinCollectBytes of new
// buffers: the dead ones then add at most that to the process's peak. With a large heap the
// walks add up instead: building a 10000-layer model and its optimizer state (4 KiB tensors
// that all stay alive, a heap of 10-40 MiB) made 16 collections of 20-65 ms each, a quarter of
// live memory apart; so one never comes before kHeapsPerCollect times the heap in new buffers,
// which keeps the walking linear in what is allocated (as Lua's own pause does for its
// objects). The heap is read as each buffer comes (a count Lua keeps): a large one freed, by a
// script's own collectgarbage() say, no longer holds the collections back.
// (bench/tputrain_models.lua, the MLP fed by a pipeline: its data set and weights are 60 MB,
// its Lua heap 1 MB, a batch 1 MB; a peak RSS of 87.9 MB with a collection per 8 MiB, 82.3 per
// 2 MiB.)
namespace {
constexpr int64_t kMinCollectBytes = int64_t(2) << 20;
constexpr int64_t kHeapsPerCollect = 2;
int64_t allocated_at_collect = 0;

void pace_collector(lua_State* L) {
  const int64_t heap_bytes = int64_t(lua_gc(L, LUA_GCCOUNT)) << 10;
  const int64_t collect_after = std::max(kMinCollectBytes, kHeapsPerCollect * heap_bytes);
  if (tensor_memory().allocated - allocated_at_collect < collect_after) return;
  lua_gc(L, LUA_GCCOLLECT);
  allocated_at_collect = tensor_memory().allocated;
}
}  // namespace

void push_tensor(lua_State* L, Tensor t) {
  LuaTensor* lt = new_tensor(L, true);
  lt->value() = std::move(t);
  pace_collector(L);
}

void push_traced(lua_State* L, TraceId trace_id, NodeId node) {
  LuaTensor* t = new_tensor(L, false);
  t->trace_id = trace_id;
  t->node = node;
  watch_trace_heap(L);
}

LuaTensor* test_tensor(lua_State* L, int arg) {
  return static_cast<LuaTensor*>(luaL_testudata(L, arg, kTensorMeta));
}
LuaTensor* check_tensor(lua_State* L, int arg) {
  LuaTensor* t = test_tensor(L, arg);
  if (!t) raise_type_error(L, arg, "tensor");
  if (t->donated_to)
    raise_user_error(L, "this tensor was donated to jit '" + *t->donated_to +
                            "', which reused its buffer for a result; use the function's results instead, or copy it "
                            "before the call (model:get_weights() copies a model's weights, which fit's train_step "
                            "donates)");
  if (!t->traced() && t->value().released())
    raise_user_error(L, "this tensor's device buffer was released by tpu.reset(); make it again after the reset "
                        "(data sets stay on the host and are kept)");
  return t;
}

void mark_donated(LuaTensor* t, const std::string& function) {
  if (!t) return;
  if (!t->traced()) t->value() = Tensor();
  t->donated_to = std::make_unique<const std::string>(function.empty() ? "?" : function);
}
bool is_tensor(lua_State* L, int arg) { return test_tensor(L, arg) != nullptr; }

const Tensor& check_concrete(lua_State* L, int arg) {
  LuaTensor* t = check_tensor(L, arg);
  if (t->traced()) raise_data_dependent(L, *t, "reading the value of");
  return t->value();
}

// ---------------------------------------------------------------- errors
namespace {
bool is_stdlib_source(const char* src) { return std::strncmp(src, "@[tpu]", 6) == 0 || src[0] == '='; }

// Chunks given on the command line ("=(command line)", "=stdin") are user code too.
bool is_user_source(const char* src) {
  return !is_stdlib_source(src) || std::strcmp(src, "=(command line)") == 0 || std::strcmp(src, "=stdin") == 0;
}

struct Scope {
  std::string name;
  std::string built_at;
  // "built_at (name)" interned in the graph of trace `trace`: a layer's every op is placed
  // there, and building and hashing the string once per op cost a deep model's trace.
  TraceId trace = 0;
  int32_t location = -1;
};
std::vector<Scope>& scopes();
}  // namespace

namespace {
// "file:line: " of the innermost frame of the user's code among levels [first, end), or "".
// The line (the costly part) is looked up only for the frame that is the user's.
std::string user_where_in(lua_State* L, int first, int end) {
  lua_Debug ar;
  for (int level = first; level < end && lua_getstack(L, level, &ar); ++level) {
    lua_getinfo(L, "S", &ar);
    if (ar.what[0] == 'C') continue;
    if (!is_user_source(ar.source)) continue;
    lua_getinfo(L, "l", &ar);
    if (ar.currentline > 0) return std::string(ar.short_src) + ":" + std::to_string(ar.currentline) + ": ";
  }
  return "";
}
}  // namespace

// From level 0: in a hook (Ctrl-C) the interrupted Lua function is level 0; when a C function
// calls this, level 0 is that function, which has no line and is skipped.
std::string user_where(lua_State* L) { return user_where_in(L, 0, std::numeric_limits<int>::max()); }

int lua_stack_depth(lua_State* L) {
  lua_Debug ar;
  int exists = -1, missing = 1;  // lua_getstack walks `level` frames: search, do not count
  while (lua_getstack(L, missing, &ar)) exists = missing, missing *= 2;
  if (exists < 0) exists = lua_getstack(L, 0, &ar) ? 0 : -1;
  while (missing - exists > 1) {
    const int mid = exists + (missing - exists) / 2;
    (lua_getstack(L, mid, &ar) ? exists : missing) = mid;
  }
  return exists + 1;
}

namespace {
// "file:line: " (user_where's) in the graph's locations, without the ": " and followed by the
// innermost open scope's name in brackets; -1 when that leaves nothing.
int32_t intern_where(Graph& g, std::string where) {
  if (where.size() > 2) where.resize(where.size() - 2);
  if (!scopes().empty()) where += " (" + scopes().back().name + ")";
  return where.empty() ? -1 : g.intern_location(where);
}

// Where a traced op is reported (its graph's location id): its own file:line when the user's
// code made it (a custom layer's call, a hand-written step); else, inside a layer of the
// library, the line that built the layer (the user's line that made the model, not the fit
// that traced it). The innermost open scope's name follows, in brackets.
// Frames the trace made are searched for the user's; without one there, the user's frame
// under the trace's first is taken, found once per trace: fit's optimizer update (most of a
// deep model's ops) searched a dozen library frames per op, and built and hashed its line.
int32_t op_location(lua_State* L, Trace& tr, Graph& g) {
  lua_Debug ar;
  for (int level = 0; lua_getstack(L, level, &ar); ++level) {
    lua_getinfo(L, "S", &ar);
    if (ar.what[0] == 'C') continue;
    if (!is_user_source(ar.source) && !scopes().empty() && !scopes().back().built_at.empty()) {
      Scope& s = scopes().back();
      if (s.trace != tr.id) s.trace = tr.id, s.location = g.intern_location(s.built_at + " (" + s.name + ")");
      return s.location;
    }
    break;
  }
  // Levels [0, made) are the frames made since the trace began (its own call's level included).
  const bool base_thread = L == tr.base_thread;
  const int made = base_thread ? lua_stack_depth(L) - tr.base_depth + 1 : std::numeric_limits<int>::max();
  std::string where = user_where_in(L, 0, made);
  if (!where.empty() || !base_thread) return intern_where(g, std::move(where));
  const auto below = [&] { return intern_where(g, user_where_in(L, made, std::numeric_limits<int>::max())); };
  if (!scopes().empty()) return below();  // the scope's name follows: not the trace's own place
  if (!tr.base_location) tr.base_location = below();
  return *tr.base_location;
}
}  // namespace

std::unordered_set<lua_CFunction>& boundary_functions() {
  static std::unordered_set<lua_CFunction> functions;
  return functions;
}

void set_functions(lua_State* L, int table, std::span<const LuaFunction> functions) {
  table = lua_absindex(L, table);
  for (const LuaFunction& f : functions) {
    lua_pushcfunction(L, f.func);
    lua_setfield(L, table, f.name);
  }
}

void raise_user_error(lua_State*, const std::string& message) { throw Error(message); }

namespace {
int l_error_tostring(lua_State* L) {
  lua_getfield(L, 1, "message");
  return 1;
}
}  // namespace

void push_error_object(lua_State* L, const char* kind, const std::string& message) {
  lua_createtable(L, 0, 2);
  lua_pushstring(L, kind);
  lua_setfield(L, -2, "kind");
  lua_pushlstring(L, message.data(), message.size());
  lua_setfield(L, -2, "message");
  if (luaL_newmetatable(L, "tpu.Error")) {
    push_function<l_error_tostring>(L);
    lua_setfield(L, -2, "__tostring");
  }
  lua_setmetatable(L, -2);
}

namespace {
// The name the running C function was called by, and whether as a method (t:sum: self is
// argument 1 but the user counts from the first argument after it).
std::pair<std::string, bool> called_name(lua_State* L) {
  lua_Debug ar;
  if (!lua_getstack(L, 0, &ar)) return {"?", false};
  lua_getinfo(L, "n", &ar);
  const bool method = ar.namewhat && std::strcmp(ar.namewhat, "method") == 0;
  return {ar.name ? ar.name : "?", method};
}

std::string type_name_at(lua_State* L, int arg) {
  if (luaL_getmetafield(L, arg, "__name") != LUA_TNIL) {
    std::string name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, arg);
    lua_pop(L, 1);
    return name;
  }
  if (lua_type(L, arg) == LUA_TLIGHTUSERDATA) return "light userdata";
  return lua_isnone(L, arg) ? "no value" : luaL_typename(L, arg);
}
}  // namespace

void push_arg_error(lua_State* L, int arg, const std::string& message) {
  auto [name, method] = called_name(L);
  std::string m = user_where(L);
  if (method && --arg == 0) m += "calling '" + name + "' on bad self (" + message + ")";
  else m += "bad argument #" + std::to_string(arg) + " to '" + name + "' (" + message + ")";
  lua_pushlstring(L, m.data(), m.size());
}

void raise_arg_error(lua_State*, int arg, const std::string& message) { throw ArgError(arg, message); }

ArgError type_error(lua_State* L, int arg, const std::string& expected) {
  return ArgError(arg, expected + " expected, got " + type_name_at(L, arg));
}

void raise_type_error(lua_State* L, int arg, const std::string& expected) { throw type_error(L, arg, expected); }

namespace {
std::string known_list(std::initializer_list<const char*> allowed) {
  std::string known;
  for (const char* a : allowed) known += std::string(known.empty() ? "" : ", ") + a;
  return known;
}

// Edits (insert, delete, replace, swap of neighbours) between a and b, ignoring case: the rule
// of the Lua library's errors.did_you_mean, for the options the binding checks.
size_t edit_distance(std::string a, std::string b) {
  for (std::string* s : {&a, &b})
    for (char& c : *s) c = char(std::tolower(static_cast<unsigned char>(c)));
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// "; did you mean 'axis'?" when exactly one allowed name is within one edit of key (up to 4
// letters) or two (longer), else "".
std::string did_you_mean(std::string_view key, std::initializer_list<const char*> allowed) {
  size_t best_d = SIZE_MAX, ties = 0;
  const char* best = nullptr;
  for (const char* a : allowed) {
    size_t d = edit_distance(std::string(key), a);
    if (d < best_d) best = a, best_d = d, ties = 1;
    else if (d == best_d) ++ties;
  }
  bool close = best && ties == 1 && best_d <= (key.size() <= 4 ? 1u : 2u);
  return close ? std::string("; did you mean '") + best + "'?" : "";
}

}  // namespace

bool check_options(lua_State* L, int arg, std::initializer_list<const char*> allowed) {
  if (lua_isnoneornil(L, arg)) return false;
  if (!lua_istable(L, arg)) throw type_error(L, arg, "option table {" + known_list(allowed) + "}");
  lua_pushnil(L);
  while (lua_next(L, arg)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) continue;  // list entries are the caller's to read
    const char* key = lua_tostring(L, -1);
    bool ok = false;
    for (const char* a : allowed) ok = ok || std::strcmp(a, key) == 0;
    if (!ok)
      throw Error(called_name(L).first + ": unknown option '" + key + "'" + did_you_mean(key, allowed) +
                  " (known options: " + known_list(allowed) + ")");
  }
  return true;
}

void check_no_more(lua_State* L, int last) {
  for (int i = last + 1; i <= lua_gettop(L); ++i)
    if (!lua_isnil(L, i)) raise_arg_error(L, i, std::string("no value expected, got ") + luaL_typename(L, i));
}

void raise_data_dependent(lua_State* L, const LuaTensor& t, const std::string& what) {
  Trace* tr = trace_by_id(t.trace_id);
  const bool condition = what.rfind("a Lua comparison", 0) == 0;
  std::string head = std::string(condition ? "data-dependent condition on" : "data-dependent value read from") +
                     " a traced " + type_str(t.dtype(), t.shape()) + " value inside jit '" + (tr ? tr->name : "?") + "'";
  raise_user_error(L, head + "\n" +
      "  " + what + " a traced tensor needs its value, but while tpu.jit traces the function into a\n"
      "  static graph there is no value yet: the graph is built once and cannot branch on data.\n"
      "  Fix: use tpu.where(cond, a, b) to select elementwise, or tpu.cond(pred, f_true, f_false, ...)\n"
      "  for traced control flow; read values on the host, outside tpu.jit, from the results.");
}

// ---------------------------------------------------------------- shapes and dtypes
// A shape as the user writes it in Lua: {3, 4}.
std::string lua_shape_str(std::span<const int64_t> s) {
  std::string r = "{";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}

Shape check_shape(lua_State* L, int arg, const char* call) {
  Shape s;
  if (lua_type(L, arg) == LUA_TNUMBER) {  // 2^20 is a float with an integer value: fine too
    int ok = 0;
    s.push_back(lua_tointegerx(L, arg, &ok));
    if (!ok) throw ArgError(arg, "shape entries must be integers");
  } else {
    if (!lua_istable(L, arg)) throw type_error(L, arg, "table");
    lua_Integer n = luaL_len(L, arg);
    for (lua_Integer i = 1; i <= n; ++i) {
      lua_geti(L, arg, i);
      int ok = 0;
      lua_Integer d = lua_tointegerx(L, -1, &ok);
      lua_pop(L, 1);
      if (!ok) throw ArgError(arg, "shape entries must be integers");
      s.push_back(d);
    }
  }
  check_lua_shape(L, s, call);
  return s;
}

void check_lua_shape(lua_State* L, std::span<const int64_t> s, const char* call) {
  if (std::string fault = shape_fault(s); !fault.empty())
    raise_user_error(L, std::string(call) + ": shape " + lua_shape_str(s) + " " + fault);
}

int64_t check_axis(lua_State* L, int arg, int64_t rank, int at) {
  if (at == 0) at = arg;
  int ok = 0;
  lua_Integer a = lua_tointegerx(L, at, &ok);
  if (!ok) throw ArgError(arg, "integer axis expected, got " + type_name_at(L, at));
  int64_t r = a < 0 ? rank + a : a - 1;
  if (a == 0 || r < 0 || r >= rank)
    // Not an argument error: the stdlib's softmax, mean, ... pass the user's axis on to max or
    // sum, a name the user did not call.
    throw Error("axis " + std::to_string(a) + " is out of range for a tensor of rank " + std::to_string(rank) +
                " (axes are 1-based; -1 is the last)");
  return r;
}

std::vector<int64_t> check_axes(lua_State* L, int arg, int64_t rank, const char* op) {
  std::vector<int64_t> axes;
  if (lua_isnoneornil(L, arg)) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    return axes;
  }
  if (lua_istable(L, arg)) {
    std::vector<int64_t> given;  // as the user wrote them, for the message
    lua_Integer n = luaL_len(L, arg);
    for (lua_Integer i = 1; i <= n; ++i) {
      lua_geti(L, arg, i);
      if (!lua_isinteger(L, -1))
        raise_arg_error(L, arg, "list of integer axes expected, got " + std::string(luaL_typename(L, -1)) + " at [" +
                                    std::to_string(i) + "]");
      given.push_back(lua_tointeger(L, -1));
      axes.push_back(check_axis(L, arg, rank, lua_gettop(L)));
      lua_pop(L, 1);
    }
    check_distinct_axes(op, given, axes);
  } else {
    axes.push_back(check_axis(L, arg, rank));
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

void check_distinct_axes(const char* op, std::span<const int64_t> given, std::span<const int64_t> axes) {
  // Reducing an axis twice is a mistake, not a no-op (NumPy rejects it too).
  for (size_t i = 0; i < axes.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (axes[i] == axes[j])
        throw Error(std::string(op) + ": axis list " + lua_shape_str(given) + " names axis " +
                    std::to_string(axes[i] + 1) + " twice");
}

void push_shape(lua_State* L, const Shape& s) {
  lua_createtable(L, int(s.size()), 0);
  for (size_t i = 0; i < s.size(); ++i) {
    lua_pushinteger(L, s[i]);
    lua_seti(L, -2, lua_Integer(i + 1));
  }
}

DType check_dtype(lua_State* L, int arg) {
  if (lua_type(L, arg) != LUA_TSTRING) raise_type_error(L, arg, "dtype name");
  const char* name = lua_tostring(L, arg);
  auto t = parse_dtype(name);
  if (!t) raise_user_error(L, std::string("unknown dtype '") + name + "' (expected f32, bf16, i32, u8 or bool)");
  return *t;
}

DType check_dtype_field(lua_State* L, const char* field) {
  if (lua_type(L, -1) != LUA_TSTRING)
    raise_user_error(L, called_name(L).first + ": " + field + " must be a dtype name (f32, bf16, i32, u8 or bool), got " +
                            luaL_typename(L, -1));
  return check_dtype(L, lua_gettop(L));
}

DType opt_dtype_field(lua_State* L, int arg, DType def) {
  if (lua_isnoneornil(L, arg)) return def;
  if (!lua_istable(L, arg)) raise_type_error(L, arg, "option table {dtype=}");
  lua_getfield(L, arg, "dtype");
  DType t = lua_isnil(L, -1) ? def : check_dtype_field(L, "dtype");
  lua_pop(L, 1);
  return t;
}

// ---------------------------------------------------------------- scopes
// Names (layers) that nodes recorded while they are open carry after their file:line, and
// where the layer was built (the user's file:line, or "" when not known).
namespace {
std::vector<Scope>& scopes() {
  static std::vector<Scope> s;
  return s;
}

// core.push_scope(name[, built_at])
int l_push_scope(lua_State* L) {
  scopes().push_back({luaL_checkstring(L, 1), luaL_optstring(L, 2, "")});  // located in no trace yet
  return 0;
}
int l_pop_scope(lua_State*) {
  if (!scopes().empty()) scopes().pop_back();
  return 0;
}
}  // namespace

// ---------------------------------------------------------------- Lua numbers as elements
namespace {
// "300", "2.5", "nan", "-inf": a Lua number for a message.
std::string number_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[32];
  if (v == std::trunc(v) && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.14g", v);
  return buf;
}

// "" when the Lua number v fits an element of dtype dt, else "300 does not fit u8 (0 to 255)".
// An integer dtype takes the numbers whose integer part is in its range (the fraction is
// dropped, as cast drops it); NaN and inf fit none. Float and bool dtypes take every number.
// (NumPy 2 raises OverflowError for a Python int out of the dtype's bounds.) Tensor:cast keeps
// its saturating conversion: that is a conversion asked for, not a value written.
std::string number_misfit(double v, DType dt) {
  double lo = 0, hi = 0;
  if (dt == DType::i32) lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  else if (dt == DType::u8) lo = 0, hi = 255;
  else return "";
  const double i = std::trunc(v);  // NaN fails both comparisons
  if (i >= lo && i <= hi) return "";
  return number_str(v) + " does not fit " + std::string(name_of(dt)) + " (" + number_str(lo) + " to " +
         number_str(hi) + ")";
}

void check_number_fits(double v, DType dt, const std::string& prefix) {
  if (std::string misfit = number_misfit(v, dt); !misfit.empty()) throw Error(prefix + misfit);
}
}  // namespace

// ---------------------------------------------------------------- applying ops
NodeId operand_node(Trace& tr, const Operand& o, DType number_dtype) {
  Graph& g = tr.graph;
  if (!o.tensor) return g.scalar(number_dtype, o.number);
  if (o.tensor->traced()) return o.tensor->node;
  // A concrete tensor used inside a trace becomes a constant of the graph (once per buffer).
  for (auto& [t, id] : tr.captured)
    if (t->raw() == o.tensor->value().raw() && t->same_type(o.tensor->value())) return id;
  auto held = std::make_shared<const Tensor>(o.tensor->value());
  Attrs a;
  a.set_literal(held);
  NodeId id = g.add(Op::constant, {}, std::move(a));
  tr.captured.emplace_back(held, id);
  return id;
}

namespace {

Trace* trace_of(const std::vector<Operand>& operands) {
  Trace* found = nullptr;
  for (const Operand& o : operands) {
    if (!o.tensor || !o.tensor->traced()) continue;
    Trace* t = trace_by_id(o.tensor->trace_id);
    if (!t || t != active_trace())
      throw Error("a traced tensor was used outside the tpu.jit call that made it "
                  "(it escaped through a global or an upvalue); return it from the function instead");
    found = t;
  }
  return found;
}

std::vector<Tensor> eager_eval(const std::vector<Operand>& operands, DType number_dtype,
                               const std::function<std::vector<NodeId>(Graph&, const std::vector<NodeId>&)>& build) {
  Graph g;
  g.name = "eager";
  std::vector<NodeId> in;
  std::vector<Tensor> args;
  for (const Operand& o : operands) {
    if (o.tensor) {
      in.push_back(g.parameter(o.tensor->value().dtype(), o.tensor->value().shape()));
      args.push_back(o.tensor->value());
    } else {
      in.push_back(g.scalar(number_dtype, o.number));
    }
  }
  g.outputs = build(g, in);
  std::vector<Tensor> out = Executable::compile(std::move(g)).run(args);
  // A result that is an argument unchanged (x * 1, a reshape) gets its own buffer, so donating
  // one tensor never changes another.
  for (Tensor& t : out)
    for (const Tensor& a : args)
      if (t.raw() == a.raw()) t = t.copy();
  return out;
}

}  // namespace

int apply_op_multi(lua_State* L, const std::vector<Operand>& operands, DType number_dtype,
                   const std::function<std::vector<NodeId>(Graph&, const std::vector<NodeId>&)>& build) {
  for (const Operand& o : operands)
    if (!o.tensor)
      if (std::string misfit = number_misfit(o.number, number_dtype); !misfit.empty())
        throw Error("the Lua number " + misfit + ", the dtype it takes from the tensor it meets; cast the tensor first (" +
                    (number_dtype == DType::u8 ? "t:cast(\"i32\")" : "t:cast(\"f32\")") + ")");
  if (Trace* tr = trace_of(operands)) {
    poll_stop("tracing");  // a signal stops a long trace inside fit (DESIGN section 11)
    Graph& g = tr->graph;
    g.current_loc = op_location(L, *tr, g);
    std::vector<NodeId> in;
    for (const Operand& o : operands) in.push_back(operand_node(*tr, o, number_dtype));
    std::vector<NodeId> out = build(g, in);
    for (NodeId id : out) push_traced(L, tr->id, id);
    return int(out.size());
  }
  std::vector<Tensor> out = eager_eval(operands, number_dtype, build);
  for (Tensor& t : out) push_tensor(L, std::move(t));
  return int(out.size());
}

int apply_op(lua_State* L, const std::vector<Operand>& operands, DType number_dtype, const Builder& build) {
  return apply_op_multi(L, operands, number_dtype,
                        [&](Graph& g, const std::vector<NodeId>& in) { return std::vector<NodeId>{build(g, in)}; });
}

// ---------------------------------------------------------------- constructors
namespace {

// A nested table gives a tensor of at most this many axes: the most a safetensors checkpoint
// holds (engine/io/safetensors.cpp). The bound also keeps the walks below short, and a table
// that holds itself ({t} with t[1] = t) ends there instead of recursing without end.
constexpr size_t kMaxTableRank = 32;

// The shape of a nested table, from its first entries: {2, 3} for {{1, 2, 3}, {4, 5, 6}}. One
// stack slot whatever the depth.
Shape table_shape(lua_State* L, int idx) {
  Shape shape;
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1)) {
    if (shape.size() == kMaxTableRank)
      raise_user_error(L, "tensor: the table is nested more than " + std::to_string(kMaxTableRank) +
                              " deep; a tensor made from a table has at most " + std::to_string(kMaxTableRank) +
                              " axes");
    const lua_Integer n = luaL_len(L, -1);
    shape.push_back(n);
    if (n == 0) break;
    lua_geti(L, -1, 1);
    lua_replace(L, -2);
  }
  lua_pop(L, 1);
  return shape;
}

// Whether the first entry of the nested table (of rank `rank`) is a boolean: then every entry is.
bool first_is_boolean(lua_State* L, int idx, size_t rank) {
  lua_pushvalue(L, idx);
  for (size_t d = 0; d < rank && lua_istable(L, -1); ++d) {
    lua_geti(L, -1, 1);
    lua_replace(L, -2);
  }
  const bool b = lua_isboolean(L, -1);
  lua_pop(L, 1);
  return b;
}

// "[2][1]": a place in a nested table.
std::string place_str(std::span<const int64_t> place) {
  std::string r;
  for (int64_t i : place) r += "[" + std::to_string(i) + "]";
  return r;
}

// A number as Lua prints it (integers without a fraction; nan, inf).
std::string lua_number_str(lua_State* L, int idx) {
  lua_pushvalue(L, idx);
  std::string s = lua_tostring(L, -1);
  lua_pop(L, 1);
  return s;
}

// A table key as the user wrote it: 'name', 0, 1.5, or its type.
std::string key_str(lua_State* L, int idx) {
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: return std::string("'") + lua_tostring(L, idx) + "'";
    case LUA_TNUMBER: return lua_number_str(L, idx);
    case LUA_TBOOLEAN: return lua_toboolean(L, idx) ? "true" : "false";
    default: return std::string("a ") + luaL_typename(L, idx);
  }
}

// A table of a tensor is a list: keys 1 to n (its length) and nothing else. Names the first
// other key, with the place of the table ("" for the outermost).
void check_list_keys(lua_State* L, int idx, lua_Integer n, std::span<const int64_t> place) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    int ok = 0;
    const lua_Integer k = lua_tointegerx(L, -1, &ok);
    if (lua_type(L, -1) == LUA_TNUMBER && ok && 1 <= k && k <= n) continue;
    const std::string where = place.empty() ? "the table" : "the table at " + place_str(place);
    const bool index = lua_type(L, -1) == LUA_TNUMBER && ok && k > n;
    raise_user_error(L, "tensor: " + where + " has a key that is not a list index, " + key_str(L, -1) + " " +
                            (index ? "(past its length " + std::to_string(n) + ": a list with a hole?)"
                                   : "(a tensor is made from lists {...} of numbers or booleans)"));
  }
}
// Fills t from the nested table at idx (of depth `place.size()` in the whole), in row-major
// order. Recursion and stack use are bounded by the rank (at most kMaxTableRank).
void table_fill(lua_State* L, int idx, const Shape& shape, std::vector<int64_t>& place, Tensor& t, int64_t& pos,
                bool bools) {
  const size_t depth = place.size();
  if (depth == shape.size()) {
    const bool is_bool = lua_isboolean(L, idx);
    if (!is_bool && !lua_isnumber(L, idx))
      raise_user_error(L, std::string("tensor: expected a number, got ") + luaL_typename(L, idx) + " at " +
                              place_str(place) + (lua_isnil(L, idx) ? " (a hole in the list?)" : ""));
    if (is_bool != bools)
      raise_user_error(L, std::string("tensor: booleans and numbers mixed in one table (the first entry is a ") +
                              (bools ? "boolean" : "number") + ", entry " + place_str(place) + " a " +
                              (bools ? "number" : "boolean") + ")");
    const double v = is_bool ? double(lua_toboolean(L, idx)) : lua_tonumber(L, idx);
    check_number_fits(v, t.dtype(), "tensor: entry " + place_str(place) + ": ");
    t.set(pos++, v);
    return;
  }
  if (!lua_istable(L, idx) || luaL_len(L, idx) != shape[depth])
    raise_user_error(L, "tensor: ragged nested table (every row must have " + std::to_string(shape[depth]) + " entries)");
  check_list_keys(L, idx, shape[depth], place);
  for (lua_Integer i = 1; i <= shape[depth]; ++i) {
    lua_geti(L, idx, i);
    place.push_back(i);
    table_fill(L, lua_gettop(L), shape, place, t, pos, bools);
    place.pop_back();
    lua_pop(L, 1);
  }
}

// tpu.tensor(nested table[, opts]): booleans give bool, numbers f32, unless opts.dtype says.
int tensor_from_table(lua_State* L) {
  const Shape shape = table_shape(L, 1);
  // Rows that share one table can multiply past any real count: {r, r, ...} nested deep.
  check_lua_shape(L, shape, "tensor");
  const bool bools = first_is_boolean(L, 1, shape.size());
  const DType dt = opt_dtype_field(L, 2, bools ? DType::boolean : DType::f32);
  // table_fill holds a table per level, and check_list_keys a key and a value on top.
  if (!lua_checkstack(L, int(shape.size()) + 4)) throw std::bad_alloc();
  LuaTensor* lt = new_tensor(L, true);  // filled in place: an error (a ragged row) leaves it to the collector
  lt->value() = Tensor(dt, shape);
  int64_t pos = 0;
  std::vector<int64_t> place;
  table_fill(L, 1, shape, place, lt->value(), pos, bools);
  pace_collector(L);
  return 1;
}

int l_tensor(lua_State* L) {
  if (LuaTensor* src = test_tensor(L, 1)) {  // tpu.tensor(t) copies the reference
    lua_pushvalue(L, 1);
    (void)src;
    return 1;
  }
  check_options(L, 2, {"dtype"});
  check_no_more(L, 2);
  bool from_bools = lua_isboolean(L, 1);
  if (lua_isnumber(L, 1) || from_bools) {
    Tensor t(opt_dtype_field(L, 2, from_bools ? DType::boolean : DType::f32), {});
    const double v = from_bools ? double(lua_toboolean(L, 1)) : lua_tonumber(L, 1);
    check_number_fits(v, t.dtype(), "tensor: ");
    t.set(0, v);
    push_tensor(L, std::move(t));
    return 1;
  }
  if (!lua_istable(L, 1)) raise_type_error(L, 1, "table, number or boolean");
  return tensor_from_table(L);
}

// An allocation that fails raises "out of host memory: ..." at the user's line.
Tensor* push_new_tensor(lua_State* L, DType dt, const Shape& s) {
  LuaTensor* lt = new_tensor(L, true);
  lt->value() = Tensor(dt, s);
  pace_collector(L);
  return &lt->value();
}

int fill_with(lua_State* L, double v, int opts, const char* call) {
  check_options(L, opts, {"dtype"});
  check_no_more(L, opts);
  Shape s = check_shape(L, 1, call);
  const DType dt = opt_dtype_field(L, opts, DType::f32);
  check_number_fits(v, dt, std::string(call) + ": ");
  Tensor& t = *push_new_tensor(L, dt, s);
  if (v != 0)
    for (int64_t i = 0; i < t.size(); ++i) t.set(i, v);
  return 1;
}
int l_zeros(lua_State* L) { return fill_with(L, 0, 2, "zeros"); }
int l_ones(lua_State* L) { return fill_with(L, 1, 2, "ones"); }
int l_full(lua_State* L) { return fill_with(L, luaL_checknumber(L, 2), 3, "full"); }

int l_arange(lua_State* L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  check_options(L, 2, {"dtype"});
  check_no_more(L, 2);
  if (n < 0) raise_user_error(L, "arange: negative length " + std::to_string(n));
  check_lua_shape(L, Shape{n}, "arange");
  const DType dt = opt_dtype_field(L, 2, DType::i32);
  // Counting needs numbers: bool has none past 1, and u8 would clamp the values past 255.
  if (dt == DType::boolean) raise_user_error(L, "arange: dtype bool cannot count (use i32, u8, bf16 or f32)");
  if (dt == DType::u8 && n > 256) raise_user_error(L, "arange: " + std::to_string(n) + " values do not fit u8 (0 to 255)");
  Tensor& t = *push_new_tensor(L, dt, {n});
  for (int64_t i = 0; i < n; ++i) t.set(i, double(i));
  return 1;
}

// ---------------------------------------------------------------- fields and metamethods
int l_index(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char* k = lua_tostring(L, 2);
    if (std::strcmp(k, "shape") == 0) return push_shape(L, t->shape()), 1;
    if (std::strcmp(k, "dtype") == 0) return lua_pushstring(L, std::string(name_of(t->dtype())).c_str()), 1;
    if (std::strcmp(k, "ndim") == 0) return lua_pushinteger(L, lua_Integer(t->shape().size())), 1;
  }
  lua_getfield(L, LUA_REGISTRYINDEX, "tpu.Tensor.methods");
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  return 1;
}

int l_gc(lua_State* L) {
  auto* t = static_cast<LuaTensor*>(luaL_checkudata(L, 1, kTensorMeta));
  if (!t->traced()) t->value().~Tensor();
  t->~LuaTensor();
  return 0;
}

int l_len(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  if (t->shape().empty()) raise_user_error(L, "# of a scalar tensor");
  lua_pushinteger(L, t->shape()[0]);
  return 1;
}

// Comparisons with Lua operators need a boolean now: fine on concrete scalars, rule 1 on
// traced values.
double scalar_value(lua_State* L, int idx, const char* op) {
  if (lua_isnumber(L, idx)) return lua_tonumber(L, idx);
  LuaTensor* t = check_tensor(L, idx);
  if (t->traced()) raise_data_dependent(L, *t, std::string("a Lua comparison (") + op + ") on");
  if (t->value().size() != 1)
    raise_user_error(L, std::string("the Lua comparison '") + op + "' needs scalar tensors, got " +
                            type_str(t->dtype(), t->shape()) + "; use t:lt(u), t:le(u) or t:eq(u) for elementwise results");
  return t->value().get(0);
}
int l_lt(lua_State* L) {
  double a = scalar_value(L, 1, "< or >"), b = scalar_value(L, 2, "< or >");
  lua_pushboolean(L, a < b);
  return 1;
}
int l_le(lua_State* L) {
  double a = scalar_value(L, 1, "<= or >="), b = scalar_value(L, 2, "<= or >=");
  lua_pushboolean(L, a <= b);
  return 1;
}
// Lua's == on two tensors: same dtype and shape, and every element equal by IEEE == (so
// 0 == -0 and a NaN equals nothing), not the same bytes.
bool equal_values(const Tensor& a, const Tensor& b) {
  if (!a.same_type(b)) return false;
  for (int64_t i = 0, n = a.size(); i < n; ++i)
    if (!(a.get(i) == b.get(i))) return false;
  return true;
}
int l_eq(lua_State* L) {
  LuaTensor* a = check_tensor(L, 1);
  LuaTensor* b = check_tensor(L, 2);
  if (a->traced()) raise_data_dependent(L, *a, "a Lua comparison (==) on");
  if (b->traced()) raise_data_dependent(L, *b, "a Lua comparison (==) on");
  lua_pushboolean(L, equal_values(a->value(), b->value()));
  return 1;
}

int l_tostring(lua_State* L) {
  auto* t = static_cast<LuaTensor*>(luaL_checkudata(L, 1, kTensorMeta));
  if (t->donated_to) {
    lua_pushfstring(L, "Tensor<donated to jit '%s'>", t->donated_to->c_str());
    return 1;
  }
  if (t->traced()) {
    Trace* tr = trace_by_id(t->trace_id);
    std::string s = "Tensor<" + type_str(t->dtype(), t->shape()) + ", traced in jit '" + (tr ? tr->name : "?") + "'>";
    lua_pushstring(L, s.c_str());
    return 1;
  }
  std::string s = format_tensor(t->value());
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

int l_item(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  check_no_more(L, 1);
  if (t->traced()) raise_data_dependent(L, *t, "item() on");
  if (t->value().size() != 1)
    raise_user_error(L, "item() needs a tensor with one element, got " + type_str(t->dtype(), t->shape()));
  double v = t->value().get(0);
  if (is_float(t->dtype())) lua_pushnumber(L, v);
  else if (t->dtype() == DType::boolean) lua_pushboolean(L, v != 0);
  else lua_pushinteger(L, lua_Integer(v));
  return 1;
}

// tonumber(t) of a tensor: its value as a number (Lua's own tonumber gives nil for any userdata),
// raising where item() does: inside jit, and for more than one element (DESIGN section 5, rule 1).
int l_tensor_tonumber(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  if (t->traced()) raise_data_dependent(L, *t, "tonumber() on");
  if (t->value().size() != 1)
    raise_user_error(L, "tonumber() needs a tensor with one element, got " + type_str(t->dtype(), t->shape()));
  const double v = t->value().get(0);
  if (is_float(t->dtype()) || t->dtype() == DType::boolean) lua_pushnumber(L, v);
  else lua_pushinteger(L, lua_Integer(v));
  return 1;
}

// The global tonumber: tensors as above, anything else to Lua's (upvalue 1). The arguments are
// checked here, as Lua's tonumber checks them, so that a bad one is reported against
// `tonumber` (called from C, the original has no name to report). A plain C function: Lua's
// errors leave it by longjmp, past no C++ frame.
int l_tonumber(lua_State* L) {
  if (lua_isnoneornil(L, 2)) {
    luaL_checkany(L, 1);
    if (test_tensor(L, 1)) return boundary<l_tensor_tonumber>(L);
  } else {
    const lua_Integer base = luaL_checkinteger(L, 2);
    luaL_checktype(L, 1, LUA_TSTRING);
    luaL_argcheck(L, 2 <= base && base <= 36, 2, "base out of range");
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

void push_element(lua_State* L, const Tensor& t, int64_t i) {
  double v = t.get(i);
  if (is_float(t.dtype())) lua_pushnumber(L, v);
  else if (t.dtype() == DType::boolean) lua_pushboolean(L, v != 0);
  else lua_pushinteger(L, lua_Integer(v));
}

void push_nested(lua_State* L, const Tensor& t, size_t depth, int64_t& pos) {
  if (depth == t.shape().size()) return push_element(L, t, pos++);
  int64_t n = t.shape()[depth];
  lua_createtable(L, int(std::min<int64_t>(n, INT32_MAX)), 0);  // a hint: Lua raises when out of memory
  for (int64_t i = 1; i <= n; ++i) {
    push_nested(L, t, depth + 1, pos);
    lua_seti(L, -2, i);
  }
}

int l_totable(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  check_no_more(L, 1);
  if (t->traced()) raise_data_dependent(L, *t, "totable() on");
  int64_t pos = 0;
  push_nested(L, t->value(), 0, pos);
  return 1;
}

int l_is_tensor(lua_State* L) {
  check_no_more(L, 1);
  lua_pushboolean(L, is_tensor(L, 1));
  return 1;
}
// core.type_key(t) -> "f32[256,784]": a tensor's part of a jit signature, made without a
// shape table (it is computed for every argument of every call).
int l_type_key(lua_State* L) {
  LuaTensor* t = check_tensor(L, 1);
  const std::string key = type_str(t->dtype(), t->shape());
  lua_pushlstring(L, key.data(), key.size());
  return 1;
}
int l_is_traced(lua_State* L) {
  check_no_more(L, 1);
  LuaTensor* t = test_tensor(L, 1);
  lua_pushboolean(L, t && t->traced());
  return 1;
}
int l_user_where(lua_State* L) {
  lua_pushstring(L, user_where(L).c_str());
  return 1;
}

const LuaFunction kMeta[] = {fn<l_index>("__index"), fn<l_gc>("__gc"), fn<l_len>("__len"),
                             fn<l_lt>("__lt"),       fn<l_le>("__le"), fn<l_eq>("__eq"),
                             fn<l_tostring>("__tostring")};
const LuaFunction kMethods[] = {fn<l_item>("item"), fn<l_totable>("totable")};
const LuaFunction kCore[] = {fn<l_tensor>("tensor"),       fn<l_zeros>("zeros"),           fn<l_ones>("ones"),
                             fn<l_full>("full"),           fn<l_arange>("arange"),         fn<l_is_tensor>("is_tensor"),
                             fn<l_type_key>("type_key"),   fn<l_is_traced>("is_traced"),   fn<l_user_where>("user_where"),
                             fn<l_push_scope>("push_scope"), fn<l_pop_scope>("pop_scope")};

}  // namespace

// ---------------------------------------------------------------- printing
namespace {
std::string format_value(const Tensor& t, int64_t i) {
  char buf[32];
  double v = t.get(i);
  if (t.dtype() == DType::boolean) return v != 0 ? "true" : "false";
  if (!is_float(t.dtype())) return std::to_string(int64_t(v));
  if (v != v) return "nan";  // printf shows a NaN's sign bit ("-nan"), which means nothing here
  std::snprintf(buf, sizeof buf, "%.4f", v);
  if (std::fabs(v) >= 1e6 || (v != 0 && std::fabs(v) < 1e-4)) std::snprintf(buf, sizeof buf, "%.4e", v);
  return buf;
}

void format_dim(const Tensor& t, size_t depth, int64_t offset, const std::vector<int64_t>& st, std::string& out) {
  const Shape& s = t.shape();
  if (depth == s.size()) {
    out += format_value(t, offset);
    return;
  }
  out += "[";
  const int64_t n = s[depth], edge = 3;
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * edge + 1 && i == edge) {
      out += depth + 1 == s.size() ? "..., " : "...,\n" + std::string(7 + depth + 1, ' ');
      i = n - edge - 1;
      continue;
    }
    format_dim(t, depth + 1, offset + i * st[depth], st, out);
    if (i + 1 < n) out += depth + 1 == s.size() ? ", " : ",\n" + std::string(7 + depth + 1, ' ');
  }
  out += "]";
}
}  // namespace

std::string format_tensor(const Tensor& t) {
  std::string out = "tensor(";
  format_dim(t, 0, 0, strides_of(t.shape()), out);
  return out + ", " + type_str(t.dtype(), t.shape()) + ")";
}

// ---------------------------------------------------------------- module
int luaopen_tpu_core(lua_State* L) {
  luaL_newmetatable(L, kTensorMeta);
  set_functions(L, -1, kMeta);
  int meta = lua_gettop(L);
  lua_newtable(L);  // methods, shared with the stdlib through core.Tensor
  set_functions(L, -1, kMethods);
  int methods = lua_gettop(L);
  lua_pushvalue(L, methods);
  lua_setfield(L, LUA_REGISTRYINDEX, "tpu.Tensor.methods");
  lua_newtable(L);
  set_functions(L, -1, kCore);
  int core = lua_gettop(L);
  lua_pushvalue(L, methods);
  lua_setfield(L, core, "Tensor");
  lua_pushvalue(L, meta);
  lua_setfield(L, core, "Tensor_meta");
  register_tensor_ops(L, methods, core);
  register_trace_functions(L, core);
  register_template_functions(L, core);
  register_random_functions(L, core);
  register_signature_functions(L, core);
  register_system_functions(L, core);
  register_mpi_functions(L, core);
  register_data_functions(L, core);
  register_io_functions(L, core);
  lua_getglobal(L, "tonumber");
  lua_pushcclosure(L, l_tonumber, 1);
  lua_setglobal(L, "tonumber");
  lua_pushvalue(L, core);
  return 1;
}

}  // namespace tpu
