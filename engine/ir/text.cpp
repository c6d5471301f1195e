// The IR text form: print_graph and parse_graph, which reads back what print_graph writes.
//
//   graph train_step
//   %0 = parameter f32[8,28,28,1] index=0  # mlp.lua:12
//   %1 = reduce_window f32[8,14,14,1] %0 window={size=3x3 stride=2x2 pad=1_1x1_1} kind=max
//   %2 = reduce f32[8,14] %1 dims=[2,3] kind=sum
//   %3 = compare bool[8,14] %2, %2 direction=gt
//   return %3
// Attributes print under what they mean for the op (axis_key, dims_keys): kinds and
// directions by name, windows whole; those that repeat the node's type are left out.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <span>
#include <sstream>

#include "core/error.h"
#include "ir/graph.h"

namespace tpu {

namespace {

// Shortest form that reads back exactly: 9 digits for f32 values, 17 for doubles.
std::string number(double v, int digits) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string list(std::span<const int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// The names the text gives the kinds kept in Attrs::axis, per op (index = the enum value).
constexpr std::string_view kDirections[] = {"lt", "le", "gt", "ge", "eq", "ne"};
constexpr std::string_view kReduceKinds[] = {"sum", "max", "min"};
constexpr std::string_view kWindowKinds[] = {"sum", "max", "argmax"};
constexpr std::string_view kRngKinds[] = {"uniform", "normal", "truncated_normal", "bits", "fold", "bernoulli"};
constexpr std::string_view kAllReduceKinds[] = {"sum", "mean"};

// What Attrs::axis means for op: the key it is printed under and, for a kind, its names.
struct AxisKey {
  std::string_view key;
  std::span<const std::string_view> names;  // empty: a number
};
AxisKey axis_key(Op op) {
  switch (op) {
    case Op::parameter: return {"index", {}};
    case Op::compare: return {"direction", kDirections};
    case Op::reduce:
    case Op::reduce_fusion: return {"kind", kReduceKinds};
    case Op::reduce_window: return {"kind", kWindowKinds};
    case Op::rng: return {"kind", kRngKinds};
    case Op::all_reduce: return {"kind", kAllReduceKinds};
    case Op::conv:
    case Op::conv_filter_grad: return {"groups", {}};
    case Op::attention:
    case Op::attention_grad: return {"causal", {}};
    default: return {"axis", {}};
  }
}

// Attributes that repeat the node's own type, left out of the text (the parser fills them
// in from the type, and takes them when given): a parameter's and an iota's dtype. The ops
// whose shape is an attribute (shape_is_attribute) read it from the type.
bool to_from_type(Op op) { return op == Op::parameter || op == Op::iota; }
// The ops whose dims were their shape: a `dims=` on them (older texts wrote one for rng) must
// repeat the type's.
bool dims_were_shape(Op op) { return shape_is_attribute(op) && op != Op::broadcast; }

// The names of dims and dims2 for op.
std::pair<std::string_view, std::string_view> dims_keys(Op op) {
  if (op == Op::slice) return {"start", "limit"};
  if (op == Op::pad) return {"lo", "hi"};
  return {"dims", ""};
}

// The value Attrs::axis takes when the text leaves it out.
int64_t default_axis(Op op) { return op == Op::conv || op == Op::conv_filter_grad ? 1 : 0; }

std::string axis_text(const Node& n) {
  const AxisKey k = axis_key(n.op);
  const int64_t v = n.attrs.axis;
  if (!k.names.empty())
    return v >= 0 && v < int64_t(k.names.size()) ? " " + std::string(k.key) + "=" + std::string(k.names[size_t(v)]) : "";
  return v != default_axis(n.op) || n.op == Op::parameter ? " " + std::string(k.key) + "=" + std::to_string(v) : "";
}

std::string attrs_text(const Node& n) {
  const Attrs& a = n.attrs;
  const auto [dims_key, dims2_key] = dims_keys(n.op);
  std::string s;
  if (!a.dims().empty()) s += " " + std::string(dims_key) + "=" + list(a.dims());
  if (!a.dims2().empty() && !dims2_key.empty()) s += " " + std::string(dims2_key) + "=" + list(a.dims2());
  if (a.window()) s += " window={" + window_text(*a.window()) + "}";
  s += axis_text(n);
  if (a.transpose_lhs) s += " ta";
  if (a.transpose_rhs) s += " tb";
  if (a.value() != 0) s += " value=" + number(a.value(), 17);
  if (a.to != DType::f32 && !to_from_type(n.op)) s += " to=" + std::string(name_of(a.to));
  if (a.literal()) {
    s += " literal=[";
    const bool integral = !is_float(a.literal()->dtype());
    for (int64_t i = 0; i < a.literal()->size(); ++i)
      s += (i ? "," : "") + (integral ? std::to_string(int64_t(a.literal()->get(i))) : number(a.literal()->get(i), 9));
    s += "]";
  }
  return s;
}

}  // namespace

namespace {
void print_nodes(const Graph& g, std::ostringstream& out, const std::string& indent) {
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    out << indent << "%" << id << " = " << op_name(n.op) << " " << type_str(n.dtype, n.shape);
    for (size_t i = 0; i < n.in.size(); ++i) out << (i ? ", %" : " %") << n.in[i];
    out << attrs_text(n);
    if (n.attrs.body()) out << " {";
    if (n.loc >= 0) out << "  # " << g.locations[size_t(n.loc)];
    out << "\n";
    if (n.attrs.body()) {
      print_nodes(*n.attrs.body(), out, indent + "  ");
      out << indent << "}\n";
    }
  }
  out << indent << "return";
  for (size_t i = 0; i < g.outputs.size(); ++i) out << (i ? ", %" : " %") << g.outputs[i];
  out << "\n";
}
}  // namespace

std::string print_graph(const Graph& g) {
  std::ostringstream out;
  out << "graph " << g.name << "\n";
  print_nodes(g, out, "");
  return out.str();
}

namespace {

class LineParser {
 public:
  LineParser(std::string_view text, int line) : s_(text), line_(line) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("IR text line " + std::to_string(line_) + ": " + what + " in '" + std::string(s_) + "'");
  }
  void skip_space() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool at_end() {
    skip_space();
    return pos_ >= s_.size();
  }
  bool eat(std::string_view tok) {
    skip_space();
    if (s_.substr(pos_, tok.size()) != tok) return false;
    pos_ += tok.size();
    return true;
  }
  void expect(std::string_view tok) {
    if (!eat(tok)) fail("expected '" + std::string(tok) + "'");
  }
  std::string_view word() {
    skip_space();
    size_t b = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    if (b == pos_) fail("expected a name");
    return s_.substr(b, pos_ - b);
  }
  int64_t integer() {
    skip_space();
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), v);
    if (ec != std::errc()) fail("expected an integer");
    pos_ = size_t(p - s_.data());
    return v;
  }
  // In place (no copy of the rest of the line: long literal lists stay linear).
  double real() {
    skip_space();
    double v = 0;
    auto [p, ec] = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), v);
    if (ec != std::errc()) fail("expected a number");
    pos_ = size_t(p - s_.data());
    return v;
  }
  template <class F>
  void bracketed(F item) {
    expect("[");
    if (eat("]")) return;
    do item();
    while (eat(","));
    expect("]");
  }
  Dims int_list() {
    Dims v;
    bracketed([&] { v.push_back(integer()); });
    return v;
  }
  NodeId ref() {
    expect("%");
    return node_id();
  }
  // The number after a '%', which must fit a NodeId (no silent wrap-around to another node).
  NodeId node_id() {
    const int64_t v = integer();
    if (v < 0 || v > std::numeric_limits<NodeId>::max()) fail("node id %" + std::to_string(v) + " out of range");
    return NodeId(v);
  }
  DType dtype() {
    auto t = parse_dtype(word());
    if (!t) fail("unknown dtype");
    return *t;
  }
  std::string_view rest() {
    skip_space();
    return s_.substr(pos_);
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  int line_;
};

// Integer and bool literals must hold exactly representable values (converting others is
// undefined behaviour, and printing them back would not give the same text).
bool fits(DType type, double v) {
  switch (type) {
    case DType::f32:
    case DType::bf16: return true;
    case DType::i32: return v == std::trunc(v) && v >= -2147483648.0 && v <= 2147483647.0;
    case DType::u8: return v == std::trunc(v) && v >= 0 && v <= 255;
    case DType::boolean: return v == 0 || v == 1;
  }
  return false;
}

// The values are read before the tensor is allocated, so a bogus type cannot ask for more
// memory than the text itself holds.
std::shared_ptr<const Tensor> parse_literal(LineParser& p, DType type, const Shape& shape) {
  std::vector<double> values;
  p.bracketed([&] {
    values.push_back(p.real());
    if (!fits(type, values.back()))
      p.fail("literal value " + number(values.back(), 17) + " is not a valid " + std::string(name_of(type)) + " value");
  });
  if (std::string e = shape_problem(shape); !e.empty()) p.fail("literal type: " + e);
  if (int64_t(values.size()) != num_elements(shape))
    p.fail("literal has " + std::to_string(values.size()) + " values, type needs " + std::to_string(num_elements(shape)));
  Tensor t(type, shape);
  for (size_t i = 0; i < values.size(); ++i) t.set(int64_t(i), values[i]);
  return std::make_shared<const Tensor>(std::move(t));
}

// "3x3" or, for padding, "1_1x1_1" (low_high per dim).
std::array<int64_t, 2> parse_pair(LineParser& p) {
  std::array<int64_t, 2> v{p.integer(), 0};
  p.expect("x");
  v[1] = p.integer();
  return v;
}

Window2D parse_window(LineParser& p) {
  Window2D w;
  p.expect("{");
  while (!p.eat("}")) {
    std::string_view key = p.word();
    p.expect("=");
    if (key == "size") w.size = parse_pair(p);
    else if (key == "stride") w.stride = parse_pair(p);
    else if (key == "lhs_dilation") w.lhs_dilation = parse_pair(p);
    else if (key == "rhs_dilation") w.rhs_dilation = parse_pair(p);
    else if (key == "pad") {
      for (int i = 0; i < 2; ++i) {
        if (i) p.expect("x");
        w.pad_lo[i] = p.integer();
        p.expect("_");
        w.pad_hi[i] = p.integer();
      }
    } else {
      p.fail("unknown window field '" + std::string(key) + "'");
    }
  }
  return w;
}

int64_t parse_axis_value(LineParser& p, Op op) {
  const AxisKey k = axis_key(op);
  if (k.names.empty()) return p.integer();
  std::string_view name = p.word();
  for (size_t i = 0; i < k.names.size(); ++i)
    if (k.names[i] == name) return int64_t(i);
  p.fail("unknown " + std::string(k.key) + " '" + std::string(name) + "' for " + std::string(op_name(op)));
}

bool windowed(Op op) {
  return op == Op::conv || op == Op::conv_filter_grad || op == Op::reduce_window || op == Op::select_and_scatter;
}

void parse_attr(LineParser& p, std::string_view key, Attrs& a, Op op, DType type, const Shape& shape) {
  const auto [dims_key, dims2_key] = dims_keys(op);
  if (key == dims_key && dims_were_shape(op)) {
    if (p.int_list() != shape) p.fail("dims= does not repeat the type's shape for " + std::string(op_name(op)));
  } else if (key == dims_key) a.set_dims(p.int_list());
  else if (key == dims2_key && !dims2_key.empty()) a.set_dims2(p.int_list());
  else if (key == axis_key(op).key) a.axis = parse_axis_value(p, op);
  else if (key == "window" && windowed(op)) a.set_window(parse_window(p));
  else if (key == "value") a.set_value(p.real());
  else if (key == "to") a.to = p.dtype();
  else if (key == "literal") a.set_literal(parse_literal(p, type, shape));
  else p.fail("unknown attribute '" + std::string(key) + "' for " + std::string(op_name(op)));
}

// The attributes the text leaves out because they repeat the node's type.
Attrs attrs_from_type(Op op, DType type) {
  Attrs a;
  if (to_from_type(op)) a.to = type;
  a.axis = default_axis(op);
  return a;
}

// The fusion pass never nests bodies; a few levels are allowed, and the bound keeps a text of
// nested '{' lines from recursing the parser off its stack.
constexpr int kMaxBodyDepth = 8;

struct Lines {
  std::vector<std::string> text;
  size_t next = 0;
  int depth = 0;  // fusion bodies being parsed
};

Graph parse_block(Lines& lines, bool nested);

void parse_node(Graph& g, LineParser& p, Lines& lines) {
  NodeId id = p.ref();
  if (id != NodeId(g.nodes.size())) p.fail("node ids must count up from %0");
  p.expect("=");
  Op op;
  if (!parse_op(p.word(), op)) p.fail("unknown op");
  DType type = p.dtype();
  Shape shape = p.int_list();
  std::vector<NodeId> in;
  Attrs a = attrs_from_type(op, type);
  if (p.eat("%")) {
    do {
      if (!in.empty()) p.expect("%");
      in.push_back(p.node_id());
    } while (p.eat(","));
  }
  std::string where;
  while (!p.at_end()) {
    if (p.eat("{")) {
      if (lines.depth == kMaxBodyDepth) p.fail("fusion bodies nested deeper than " + std::to_string(kMaxBodyDepth));
      ++lines.depth;
      a.set_body(std::make_shared<const Graph>(parse_block(lines, true)));
      --lines.depth;
      continue;
    }
    if (p.eat("#")) {
      where = std::string(p.rest());
      break;
    }
    std::string_view key = p.word();
    if (key == "ta") a.transpose_lhs = true;
    else if (key == "tb") a.transpose_rhs = true;
    else {
      p.expect("=");
      parse_attr(p, key, a, op, type, shape);
    }
  }
  g.current_loc = where.empty() ? -1 : g.intern_location(where);
  NodeId made;
  try {
    made = g.add(op, std::move(in), std::move(a), shape);
  } catch (const Error& e) {
    p.fail(e.what());
  }
  if (g.at(made).dtype != type || g.at(made).shape != shape) p.fail("type does not match the op's shape rule");
  if (op == Op::parameter) g.params.push_back(made);
}

// Parses nodes up to "return" (and, when nested, the closing "}").
Graph parse_block(Lines& lines, bool nested) {
  Graph g;
  bool returned = false;
  while (lines.next < lines.text.size()) {
    const int number = int(++lines.next);
    LineParser p(lines.text[size_t(number - 1)], number);
    if (p.at_end()) continue;
    if (returned) {
      if (nested && p.eat("}")) return g;
      p.fail("text after 'return'");
    }
    if (!nested && p.eat("graph")) {
      g.name = std::string(p.rest());
    } else if (p.eat("return")) {
      returned = true;
      if (!p.at_end()) {
        do g.outputs.push_back(p.ref());
        while (p.eat(","));
      }
      for (NodeId o : g.outputs)
        if (o < 0 || o >= NodeId(g.nodes.size())) p.fail("return of an unknown node");
    } else {
      parse_node(g, p, lines);
    }
  }
  if (!returned || nested) throw Error(nested ? "IR text: fusion body without a closing '}'" : "IR text: missing 'return' line");
  g.current_loc = -1;
  return g;
}

}  // namespace

Graph parse_graph(const std::string& text) {
  Lines lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.text.push_back(line);
  return parse_block(lines, false);
}

}  // namespace tpu
